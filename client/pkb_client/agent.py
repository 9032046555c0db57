"""``pkb agent``: the loop a bot runs. Fetch the prompt, ask the model command for a solution
(the prompt on its stdin, the file on its stdout), submit it as a sample of a run, and feed the
verdict (failure class, rank, message, traceback or compiler log, timing) back as the next
turn's context, up to N turns or until a turn passes."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from typing import Any, Callable

from . import exits
from .http import Api, ApiError
from .reports import feedback
from .waiting import wait_for_submission

# Refusals that are about the run, not the file: the loop stops on them.
RUN_REFUSALS = ("too_many_samples", "run_full", "daily_cap", "unknown_problem",
                "unsupported_world_size")
FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)


class ModelCommandError(Exception):
    pass


@dataclass
class AgentResult:
    run: int
    turns: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return any(t.get("verdict") == "pass" for t in self.turns)

    @property
    def exit_code(self) -> int:
        return exits.OK if self.passed else exits.FAILED


def extract_solution(output: str) -> str:
    """The model's file: the last fenced Python block when it wrote prose around one."""
    blocks = FENCE.findall(output)
    return (blocks[-1] if blocks else output).strip() + "\n"


def ask_model(command: str, prompt: str, timeout_s: float) -> str:
    try:
        done = subprocess.run(command, shell=True, input=prompt, capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ModelCommandError(f"the model command ran past {timeout_s:.0f} s") from None
    if done.returncode != 0:
        raise ModelCommandError(f"the model command exited {done.returncode}: "
                                f"{done.stderr.strip()[-500:]}")
    if not done.stdout.strip():
        raise ModelCommandError("the model command printed nothing")
    return extract_solution(done.stdout)


def run_agent(api: Api, *, run_id: int, problem: str, hardware: str, backend: str, command: str,
              turns: int, wait_s: float, model_timeout_s: float,
              show: Callable[[str], None]) -> AgentResult:
    prompt = api.get("prompt/", problem=problem, hardware=hardware, backend=backend)["prompt"]
    result = AgentResult(run=run_id)
    context = ""
    for turn in range(1, turns + 1):
        show(f"turn {turn}/{turns}: asking the model")
        source = ask_model(command, prompt + ("\n" + context if context else ""), model_timeout_s)
        answer = api.post(f"runs/{run_id}/samples/", json={
            "problem": problem, "source": source, "name": f"{problem}-turn{turn}.py",
            "turn": turn, "context": context})
        row = answer["files"][0]
        record: dict[str, Any] = {"turn": turn, "status": row["status"], "code": row["code"],
                                  "submission": row["submission"]}
        if row["status"] != "accepted" and row["code"] in RUN_REFUSALS:
            # Not the model's file but the run: another turn would be refused the same way.
            raise ApiError(f"turn {turn}: {row['message']}", code=row["code"], status=409)
        if row["status"] != "accepted":
            show(f"turn {turn}: refused: {row['code']}: {row['message']}")
            context = feedback(None, turn, refused=row)
            result.turns.append(record)
            continue
        sub = wait_for_submission(api, row["submission"], timeout_s=wait_s,
                                  show=lambda line, t=turn: show(f"turn {t}: {line}"))
        record.update(verdict=sub.get("verdict"), failure_class=sub.get("failure_class") or None,
                      speedup=sub.get("speedup"), speedup_low=sub.get("speedup_low"),
                      status=sub["status"])
        result.turns.append(record)
        if sub.get("verdict") == "pass":
            show(f"turn {turn}: pass" + (f", speedup {sub['speedup']:.3f}x" if sub.get("speedup") else ""))
            break
        context = feedback(sub, turn)
    return result
