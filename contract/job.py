"""The evaluation job: what the portal sends (by task name, as JSON) and what the worker runs.

A job carries everything a worker needs (it has no database), including its deadline. The
deadline reaches the evaluator too (``--deadline``), a margin inside the worker's own kill, so
that a candidate which runs long is stopped, diagnosed and reported by the evaluator (stuck
ranks, their stacks) instead of being killed without a word.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any, Mapping, Optional

TASK_NAME = "pkb.evaluate"
# Seconds between the evaluator's own deadline and the worker's kill: its diagnosis (stack dumps,
# the kill of every rank) and the report fit in it.
DEADLINE_MARGIN_S = 30.0


# Fields a payload may leave out (older portals send no sweep fields).
OPTIONAL_FIELDS = {"dtype", "hardware_profile", "sweep", "sweep_sizes", "sweep_timeout_s", "sweep_base"}


def sweep_follows(report: Mapping[str, Any]) -> bool:
    """Whether a requested sweep runs after this evaluation: only a candidate that passed is
    swept (a failing one would fail again at every size). Worker and portal both decide by it."""
    return report.get("verdict") == "pass"


class JobError(ValueError):
    """A payload that is not a job: says which field and why."""


@dataclass(frozen=True)
class EvalJob:
    submission_id: int
    problem: str
    problem_version: str
    source: str
    world_size: int
    device: str  # "cpu" or "cuda"
    size: str
    dtype: Optional[str]  # None: the problem's default
    trials: int
    hardware_profile: Optional[str]  # None: the evaluator picks the committed profile
    timeout_s: float  # the whole evaluation, as the portal allows it
    callback_url: str  # the submission's worker endpoint (contract.callbacks.submission_url)
    token: str  # the per-submission secret the worker presents
    # A message-size sweep after the evaluation (`pkb sweep`, docs/sweeps.md), when it passes.
    sweep: bool = False
    sweep_sizes: Optional[list[int]] = None  # target message bytes; None: the problem's own range
    sweep_timeout_s: float = 0.0  # the whole sweep, as the portal allows it
    sweep_base: Optional[str] = None  # the preset the other shape parameters keep; None: the axis's

    def to_payload(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_payload(cls, payload: Any) -> "EvalJob":
        if not isinstance(payload, dict):
            raise JobError(f"a job is a JSON object, not {type(payload).__name__}")
        names = {f.name for f in fields(cls)}
        missing = sorted(names - {k for k, v in payload.items() if v is not None} - OPTIONAL_FIELDS)
        if missing:
            raise JobError(f"the job lacks {', '.join(missing)}")
        # A field with a default may be left out or null; the others are passed as they are.
        defaulted = {f.name for f in fields(cls) if f.default is not MISSING}
        values = {name: payload.get(name) for name in names
                  if name not in defaulted or payload.get(name) is not None}
        try:
            job = cls(**{**values, "submission_id": int(values["submission_id"]),
                         "world_size": int(values["world_size"]), "trials": int(values["trials"]),
                         "timeout_s": float(values["timeout_s"]),
                         "sweep": bool(values.get("sweep", False)),
                         "sweep_sizes": [int(b) for b in values["sweep_sizes"]] if values.get("sweep_sizes") else None,
                         "sweep_timeout_s": float(values.get("sweep_timeout_s", 0.0))})
        except (TypeError, ValueError) as exc:
            raise JobError(f"a job field has the wrong type: {exc}") from None
        if job.sweep and job.sweep_timeout_s <= 0:
            raise JobError("a job that asks for a sweep needs a positive sweep_timeout_s")
        if job.sweep_sizes is not None and min(job.sweep_sizes) <= 0:
            raise JobError("sweep_sizes must be positive byte counts")
        if job.device not in ("cpu", "cuda"):
            raise JobError(f"device must be cpu or cuda, not {job.device!r}")
        if job.world_size < 1 or job.trials < 1 or job.timeout_s <= 0:
            raise JobError("world_size, trials and timeout_s must be positive")
        return job

    def deadline_s(self, worker_limit_s: float) -> float:
        """Seconds the evaluator may take: inside the worker's kill by a margin."""
        limit = min(self.timeout_s, worker_limit_s)
        return max(limit - DEADLINE_MARGIN_S, limit / 2)

    def command(self, eval_command: list[str], solution: Path, report_fd: int, worker_limit_s: float,
                extra: tuple[str, ...] = ()) -> list[str]:
        """The ``pkb eval`` command line that runs this job, its report on ``report_fd``."""
        cmd = [*eval_command, "eval", "--problem", self.problem, "--solution", str(solution),
               "--world-size", str(self.world_size), "--device", self.device, "--size", self.size,
               "--trials", str(self.trials), "--deadline", f"{self.deadline_s(worker_limit_s):.0f}",
               "--report-fd", str(report_fd), "--progress"]
        if self.dtype:
            cmd += ["--dtype", self.dtype]
        if self.hardware_profile:
            cmd += ["--hardware", self.hardware_profile]
        return cmd + list(extra)

    def sweep_command(self, eval_command: list[str], solution: Path, report_fd: int, worker_limit_s: float,
                      extra: tuple[str, ...] = ()) -> list[str]:
        """The ``pkb sweep`` command line of this job's sweep, its report on ``report_fd``."""
        limit = min(self.sweep_timeout_s, worker_limit_s)
        cmd = [*eval_command, "sweep", "--problem", self.problem, "--solution", str(solution),
               "--world-size", str(self.world_size), "--device", self.device,
               "--trials", str(self.trials), "--deadline", f"{max(limit - DEADLINE_MARGIN_S, limit / 2):.0f}",
               "--report-fd", str(report_fd)]
        if self.sweep_sizes:
            cmd += ["--sizes", *map(str, self.sweep_sizes)]
        if self.sweep_base:
            cmd += ["--base", self.sweep_base]
        if self.dtype:
            cmd += ["--dtype", self.dtype]
        if self.hardware_profile:
            cmd += ["--hardware", self.hardware_profile]
        return cmd + list(extra)
