"""The judge's barrier per call, with stand-in ranks (no processes): no call is drawn, copied or
followed by the next one until every rank has returned it.

Before, the judge decided a call's draw when the first rank returned it and sent that rank its
next "go" at once: the first rank could time its "go", learn whether the call was checked, and
tell a peer that had not yet written its outputs (red team, learns_the_draw_from_a_peer); and the
ranks aligned each call with a barrier of their own, which a candidate can delete from its process
while the reference pays it (skips_the_alignment).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from evaluator.judge.buffers import RankBuffers
from evaluator.judge.driver import Judge

RANKS, CALLS = 2, 5


class StandInRanks:
    """A side whose ranks return calls in a fixed order: rank 1 trails rank 0 by one poll."""

    def __init__(self, events: list[tuple[Any, ...]]) -> None:
        self.events = events
        self.ranks = [SimpleNamespace(answered_after=None) for _ in range(RANKS)]
        self.started = [0] * RANKS  # per rank: the call it is running
        self.done = False
        self.polls = 0
        self.duplicate_blocks: list[Any] = []

    def thaw(self) -> None: ...
    def freeze(self) -> bool: return True
    def cpu_seconds(self) -> float: return 0.0
    def thread_run_ns(self) -> dict[tuple[int, int], int]: return {}
    def waiting(self) -> bool: return self.done

    def command_each(self, payloads: list[dict[str, Any]], **_: Any) -> None:
        self.commands = payloads

    def poll(self, timeout: float) -> None:
        self.polls += 1
        return None

    def take_called(self) -> list[tuple[int, int, int]]:
        # One rank returns per poll, rank 0 first: the judge sees rank 0's "called" alone.
        rank = self.polls % RANKS
        call = self.started[rank]
        if call >= CALLS - 1:
            if all(c >= CALLS - 1 for c in self.started):
                self.done = True
            return []
        self.events.append(("called", rank, call))
        return [(rank, self.block, call)]

    def send_to(self, rank: int, payload: dict[str, Any]) -> None:
        assert payload["cmd"] == "go"
        self.events.append(("go", rank, payload["call"]))
        self.started[rank] = payload["call"]


def test_no_call_is_copied_or_followed_until_every_rank_has_returned_it():
    buffers = {"candidate": [RankBuffers(f"barrier{r}", 2, 64, 256) for r in range(RANKS)]}
    events: list[tuple[Any, ...]] = []
    judge = Judge(None, (), None, buffers, step_s=5.0)  # type: ignore[arg-type]
    run = StandInRanks(events)
    run.block = judge.block_id + 1
    written = [[b.stage_inputs(i, {"x": torch.full((4,), float(i))}) for i in range(CALLS)] for b in buffers["candidate"]]
    judge.run_calls(run, None, "candidate", written, within_s=5.0, what="a block",  # type: ignore[arg-type]
                    on_called=lambda rank, call: events.append(("copied", rank, call)))
    assert all(call["align"] is False for command in run.commands for call in command["calls"])
    for call in range(CALLS - 1):
        returned = max(events.index(("called", rank, call)) for rank in range(RANKS))
        copied = [events.index(("copied", rank, call)) for rank in range(RANKS)]
        goes = [events.index(("go", rank, call + 1)) for rank in range(RANKS)]
        assert returned < min(copied), f"call {call} was copied before every rank returned it: {events}"
        assert max(copied) < min(goes), f"a rank got call {call + 1} before call {call} was copied for all: {events}"
    for b in buffers["candidate"]:
        b.close()
