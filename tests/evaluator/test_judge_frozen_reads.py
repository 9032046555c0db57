"""The judge reads a block's last outputs and inputs only while the candidate stands frozen, and
checks afterwards that none of its threads ran meanwhile (judge/driver.py ``check_stood_frozen``);
every reading from the candidate's freeze to its thaw is held to the one before (``read_still``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from evaluator.judge.driver import Judge
from evaluator.paired import DrivenFailure


class Threads:
    """A side whose threads' run times (ns, per (pid, tid)) are what the test says."""

    def __init__(self, *readings: dict[tuple[int, int], int]) -> None:
        self.readings = list(readings)

    def thread_run_ns(self) -> dict[tuple[int, int], int]:
        return self.readings.pop(0)


def judge_after_freeze(side: Threads) -> SimpleNamespace:
    state = SimpleNamespace(frozen_run=None)
    state.read_still = lambda *args: Judge.read_still(state, *args)  # type: ignore[arg-type]
    state.frozen_run = (side, side.thread_run_ns())  # as run_calls records it once the side is frozen
    return state


def test_threads_that_did_not_run_pass_and_each_reading_is_the_next_ones_base() -> None:
    still = {(10, 10): 5_000, (10, 11): 7}
    side = Threads(still, dict(still), dict(still), {(10, 10): 5_000, (10, 11): 8})
    state = judge_after_freeze(side)
    Judge.check_stood_frozen(state, "timed block 3")  # type: ignore[arg-type]
    assert state.frozen_run == (side, still)
    # The next reading (before the reference's block, say) is held to this one: the window
    # between them is read too (the seventh red-team pass found two such windows unread).
    Judge.read_still(state, side, "before the reference's timed block 4", "gain")  # type: ignore[arg-type]
    with pytest.raises(DrivenFailure) as raised:
        Judge.read_still(state, side, "before their timed block 5", "gain")  # type: ignore[arg-type]
    assert "ran for 1 ns before their timed block 5" in raised.value.failure["message"]


@pytest.mark.parametrize("after", [{(10, 10): 5_001, (10, 11): 7},  # a microsecond's work is work
                                   {(10, 10): 5_000, (10, 11): 7, (10, 12): 900}])  # a new thread ran
def test_any_run_time_after_the_freeze_is_the_candidates_protocol_violation(after) -> None:
    state = judge_after_freeze(Threads({(10, 10): 5_000, (10, 11): 7}, after))
    with pytest.raises(DrivenFailure) as raised:
        Judge.check_stood_frozen(state, "timed block 3")  # type: ignore[arg-type]
    assert raised.value.side == "candidate"
    assert raised.value.failure["failure_class"] == "protocol_violation"
    assert "after they were stopped at the end of timed block 3" in raised.value.failure["message"]
