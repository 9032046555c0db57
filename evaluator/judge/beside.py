"""The candidate stands frozen while the in-rank judge runs the reference (the GPUs' default judge;
``cpu_judge="ranks"`` on CPU).

Judged in the ranks, both sides' processes used to be alive for the whole evaluation: they started
at once, and each of the reference's timed blocks ran beside whatever the candidate had left
running. Helpers of the candidate, each in a session of its own (a scheduler group of its own),
took the processors from the reference: its start-up past its sandbox's set-up time, its timed
blocks past their deadlines, its recomputation past the evaluation's time, and a wrong candidate
ended as our harness_error (red team, ninth pass: starves_the_reference_beside_the_ranks_judge,
and starves_the_reference_start and blames_the_reference run against this judge). The judge
outside the ranks had been closed against each (it freezes a side while the other runs); this
gives the in-rank judge the same: the candidate is frozen before the reference starts and around
each of the reference's blocks, and read as the judge outside reads it (``driver.check_stood_still``:
any run time or ended thread meanwhile; processor ticks; a process started while it stood
stopped), its failure raised before the reference's is.
"""

from __future__ import annotations

from typing import Optional

from ..launcher import SideRun
from ..paired import DrivenFailure
from ..report import FailureClass, make_failure
from .driver import FROZEN_CPU_S, FROZEN_RUN_NS, check_host_pools, check_stood_still

GAIN = "work that escapes the freeze runs beside the other side"


class FrozenBeside:
    """Freezes the candidate for one phase of the reference (``freeze``) and reads and thaws it
    afterwards (``thaw``): the candidate's protocol_violation if it ran meanwhile."""

    def __init__(self, candidate: SideRun) -> None:
        self.candidate = candidate
        self.reading: Optional[dict[tuple[int, int], int]] = None
        self.cpu_s = 0.0

    def freeze(self, what: str) -> None:
        """Stop every process of the candidate before the reference's ``what``."""
        if not self.candidate.freeze():
            raise DrivenFailure("candidate", make_failure(
                FailureClass.PROTOCOL_VIOLATION,
                f"the candidate's processes could not all be stopped before the reference's {what} (a "
                "process that cannot be stopped keeps running while the other side is timed)"))
        check_host_pools(self.candidate, f"before the reference's {what}")
        self.cpu_s = self.candidate.cpu_seconds()
        self.reading = self.candidate.thread_run_ns()

    def read(self, what: str) -> None:
        """The candidate stood still since ``freeze``, or its failure (raised before any failure of
        the reference's ``what`` is: starved by the candidate, that one is not ours)."""
        if self.reading is None:
            return
        before, self.reading = self.reading, None
        when = f"while they stood stopped, during the reference's {what}"
        check_stood_still(before, self.candidate.thread_run_ns(), FROZEN_RUN_NS, when, GAIN)
        if (used := self.candidate.cpu_seconds() - self.cpu_s) >= FROZEN_CPU_S:
            raise DrivenFailure("candidate", make_failure(
                FailureClass.PROTOCOL_VIOLATION,
                f"the candidate's processes used {used * 1e3:.0f} ms of processor {when} ({GAIN})"))

    def thaw(self, what: str) -> None:
        """Read the candidate (``read``), then continue it; a process or thread started while it
        stood stopped (the sandbox counts them) is its protocol_violation too."""
        self.read(what)
        self.candidate.thaw()
        if getattr(self.candidate.box, "started_while_frozen", False):
            raise DrivenFailure("candidate", make_failure(
                FailureClass.PROTOCOL_VIOLATION,
                f"a process or thread of the candidate's side was started while the side stood stopped, "
                f"during the reference's {what} (a process continued by a SIGCONT it had sent itself, say: "
                f"{GAIN})"))
