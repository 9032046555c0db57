"""What went wrong with a side, in words a submitter can act on: which ranks, where, and why.

A mix-in of ``launcher.SideRun``: it reads the side's state (ranks, their events, the box's limit
report) and turns the first problem into a ``Failure``, with stacks and stderr tails.
"""

from __future__ import annotations

import selectors
import signal
import time
from typing import Any

from .job import trial_step
from .report import Failure, FailureClass, make_failure
from .side import signal_name


def _text(value: object) -> str | None:
    """A field of a rank's error message as the report's schema has it: text or nothing. The
    message comes from the rank, where candidate code can send its own (red team,
    reports_odd_error_fields: a mapping here broke the report's schema, and the portal refused
    the report: no verdict)."""
    return value if isinstance(value, str) else None


class SideDiagnosis:
    """Needs, from the side: ``ranks``, ``side``, ``job``, ``limits``, ``resources``, ``sandbox``,
    ``errors``, ``crashes``, ``limit``, ``box``, ``_read`` and ``_limit``."""

    def _stderr(self) -> dict[str, str]:
        return {str(s.rank): s.log_tail.decode(errors="replace") for s in self.ranks}

    def _resource_failure(self) -> Failure:
        assert self.limit is not None
        rank = self.limit.get("rank")
        where = f" {self._progress(rank)}" if isinstance(rank, int) and 0 <= rank < len(self.ranks) else ""
        failure_class = FailureClass.HARNESS_ERROR if self.side == "reference" else FailureClass.RESOURCE_LIMIT
        return make_failure(failure_class, f"{self.limit.get('message')}{where}; the side was stopped",
                            rank=rank, stderr=self._stderr())

    def _failure_from_problems(self) -> Failure:
        # A rank that died silently comes first: its peers' errors ("connection reset by peer",
        # "remote process exited") are the consequence, not the cause.
        if self.errors and not self.crashes:
            first = self.errors[0]
            if first.get("failure_class") == FailureClass.COMPILE_ERROR.value and not first.get("compiler_output"):
                # Ranks that build one extension together: one compiles while the others wait on
                # its lock, then find no library. The one that compiled says why.
                first = next((e for e in self.errors if e.get("compiler_output")), first)
            try:
                failure_class = FailureClass(first.get("failure_class"))
            except ValueError:
                failure_class = FailureClass.RUNTIME_ERROR
            if failure_class == FailureClass.OUT_OF_MEMORY and self.job["device"] == "cpu" and self.sandbox:
                failure_class = FailureClass.RESOURCE_LIMIT  # the address-space limit refused it
            if self.side == "reference":
                failure_class = FailureClass.HARNESS_ERROR
            elif failure_class == FailureClass.HARNESS_ERROR:
                # The class is the rank's word, and candidate code shares the rank (it raises
                # CandidateError or forges the message): no harness code in a candidate's rank
                # reports our fault, so a candidate claiming it is failing at its own run (red
                # team, claims_harness_error: its exception was reported as harness_error).
                failure_class = FailureClass.RUNTIME_ERROR
            rank = first.get("rank")
            message = f"rank {rank}: {first.get('message')}"
            if failure_class == FailureClass.RESOURCE_LIMIT:
                limit = self.resources.memory_bytes_per_rank / 2**30
                message += f" (the limit is {limit:.3g} GiB of host memory per rank)"
            return make_failure(failure_class, message, rank=rank, traceback=_text(first.get("traceback")),
                                compiler_output=_text(first.get("compiler_output")), stderr=self._stderr())
        rank, returncode = self.crashes[0]
        if returncode < 0:
            how = f"was killed by {signal_name(returncode)}"
            if returncode == -signal.SIGKILL:
                how += " (the kernel's out-of-memory killer does this)"
        else:
            how = f"exited with status {returncode} without reporting a result"
        failure_class = FailureClass.HARNESS_ERROR if self.side == "reference" else FailureClass.CRASH
        tail = self.ranks[rank].log_tail.decode(errors="replace")
        if "out of memory" in tail.lower():
            failure_class = FailureClass.OUT_OF_MEMORY if self.side != "reference" else failure_class
        return make_failure(failure_class, f"rank {rank} {how} {self._progress(rank)}", rank=rank,
                            stderr=self._stderr())

    def _plan(self) -> list[tuple[str, str]]:
        """(label, description) of every step a rank reports, in order."""
        tasks = self.job["tasks"]
        plan = []
        for task in tasks:
            where = f" of {task['problem']}" if len(tasks) > 1 else ""
            trials = [(f"{task['task']}:{trial_step(t)}", f"{trial_step(t)}{where}") for t in task["trials"]]
            timing = [(f"{task['task']}:timing", f"timing{where}")] if task.get("timing") else []
            # A driven reference times first and runs its trials at the end (rank_runner.py).
            last_trials = self.job.get("driven") and self.side == "reference"
            plan += timing + trials if last_trials else trials + timing
        return plan

    def _progress(self, rank: int) -> str:
        state = self.ranks[rank]
        if state.command and state.deadline is not None:
            return f"in {state.command}"
        if not state.started:
            return "during start-up (process group, import of the solution, compilation)"
        plan = self._plan()
        done = [label for label in state.labels if not label.endswith("timing started")]
        if len(done) >= len(plan):
            return "after its last step"
        step = plan[len(done)][1]
        return f"during {step}" if step.startswith("timing") else f"in {step}"

    def _deadlock(self, selector: selectors.BaseSelector, box: Any, over_total: bool) -> Failure:
        stacks = self.dump_stacks(selector, box)
        progress = {s.rank: len(s.labels) + (1 if s.started else 0) for s in self.ranks if not s.finished}
        least = min(progress.values())
        stuck = sorted(rank for rank, n in progress.items() if n == least)
        # A rank over the build limit (its peers wait for it: they are not the ones stuck).
        builders = [s.rank for s in self.ranks if s.building_since is not None
                    and (s.deadline is None or s.builds_allowed) and not over_total]
        if builders and any(s.deadline is not None for s in self.ranks) \
                and getattr(self, "build_credit_s", 0.0) < self.limits.build_s:
            builders = []  # a judged side that stopped working: not the build limit, a hang
        if builders:
            stuck, ahead = builders, []
        else:
            ahead = sorted(set(range(len(self.ranks))) - set(stuck))
        where = self._progress(stuck[0])
        who = f"rank{'s' if len(stuck) > 1 else ''} {', '.join(map(str, stuck))}"
        if over_total:
            message = f"the side ran past its time limit of {self.limits.total_s:.0f} s; {who} {where}"
        elif builders:
            message = f"{who} {where} was still building after {self.limits.build_s:.0f} s (the build limit)"
        elif self.ranks[stuck[0]].deadline is not None and self.ranks[stuck[0]].command.startswith("timed"):
            message = (f"{who} did not finish a timed block in time ({self.ranks[stuck[0]].command}, "
                       f"{self.ranks[stuck[0]].command_limit_s:.0f} s)")
        elif self.ranks[stuck[0]].deadline is not None and self.ranks[stuck[0]].command:
            message = f"{who} made no progress for {self.ranks[stuck[0]].command_limit_s:.0f} s {where}"
        elif self.ranks[stuck[0]].deadline is not None:
            message = f"{who} did not finish a timed block in time {where}"
        else:
            message = f"{who} made no progress for {self._limit(self.ranks[stuck[0]]):.0f} s {where}"
        if ahead:
            message += f" while rank{'s' if len(ahead) > 1 else ''} {', '.join(map(str, ahead))} went further"
        failure_class = FailureClass.HARNESS_ERROR if self.side == "reference" else FailureClass.DEADLOCK
        if builders and self.side != "reference":
            message += ": the build did not finish; every rank was killed"
            failure_class = FailureClass.COMPILE_ERROR
        else:
            message += ": deadlock or timeout; every rank was killed"
        return make_failure(failure_class, message, rank=stuck[0], stacks=stacks, stderr=self._stderr())

    def dump_stacks(self, selector: selectors.BaseSelector, box: Any) -> dict[str, str]:
        live = [s for s in self.ranks if s.returncode is None]
        if live:
            box.dump_stacks()
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                self._read(selector, 0.1)
        return {str(s.rank): s.stacks.decode(errors="replace") for s in self.ranks if s.stacks}
