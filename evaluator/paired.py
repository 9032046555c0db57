"""Paired timing: both sides' ranks alive at once, timed in alternating rounds under our control.

The measured quantity is the ratio. A round is one block of calls on each side, back to back,
in ABBA order (candidate first in even rounds, reference first in odd ones) so that a drift in
clocks or load weighs on both alike; its ratio is reference block time / candidate block time,
each the median over the block's calls of the slowest rank's time. The speedup is the median of
the per-round ratios, with a bootstrap 95% interval; rounds are added until the interval's
half-width is within the target or a cap is hit, and the report says which.

Everything that decides what is measured (how many calls, when to stop, which calls are checked)
happens here, in the parent; the ranks only answer commands (rank_timing.py).
"""

from __future__ import annotations

import math
import secrets
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .config import TimingConfig
from .launcher import SideRun
from .report import Failure, FailureClass, make_failure
from .stats import median_interval, slowest_rank_per_iteration

RESAMPLES = 2000
SNAPSHOT_BLOCK_S = 0.3


@dataclass
class Block:
    calls: int
    per_rank_ms: list[list[float]]
    gaps_ms: list[list[float]]
    wall_ms: float = 0.0  # our own clock, from the command to the last rank's answer

    @property
    def unaccounted_ms(self) -> float:
        """Per call, the part of our wall time the ranks' timings do not cover: the harness's
        alignment and input refills, alike on both sides, plus whatever a rank left out of what
        it reported. Candidate code can write a rank's report; it cannot stop our clock."""
        return max(0.0, self.wall_ms - sum(self.iterations_ms)) / self.calls

    @property
    def iterations_ms(self) -> list[float]:
        return slowest_rank_per_iteration(self.per_rank_ms)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.iterations_ms)

    @property
    def wall_per_call_ms(self) -> float:
        """Our own clock's share of the block per call, harness work included."""
        return self.wall_ms / self.calls

    def time_ms(self, clock: str) -> float:
        """The block's time per call on ``clock``: ``ranks`` (the median call as the ranks timed
        it) or ``parent`` (our wall clock, which candidate code cannot stop)."""
        return self.median_ms if clock == "ranks" else self.wall_per_call_ms


@dataclass
class SideBlocks:
    """What one side ran: warm-up calls, then the blocks of the rounds."""

    run: SideRun
    name: str
    calls: int = 0  # every call made, warm-up included: call numbers are global
    warmup_calls: int = 0
    copies: int = 0
    per_call_ms: float = 0.0
    counted: list[Block] = field(default_factory=list)
    # slot -> (call, each rank's digest of that call's outputs as it returned): the latest call
    # in every slot, which is what the side keeps (digest.py).
    digests: dict[int, tuple[int, list[list[str]]]] = field(default_factory=dict)

    def digests_of(self, call: int) -> Optional[list[list[str]]]:
        kept = self.digests.get(call % self.copies) if self.copies else None
        return kept[1] if kept is not None and kept[0] == call else None


@dataclass
class PairedTiming:
    clock: str  # "ranks" or "parent": where the ratios' times come from (PairedTimer)
    rounds: list[dict[str, float]]
    speedup: float
    interval: tuple[float, float]
    stop_reason: str
    seconds: float  # in rounds, snapshots excluded
    candidate: SideBlocks
    reference: SideBlocks

    def half_width(self) -> float:
        return (self.interval[1] - self.interval[0]) / 2 / self.speedup


def answered_twice(run: SideRun) -> Optional[Failure]:
    """A rank answered one block twice: the harness answers once, so something else that holds
    the status channel (candidate code, the token from memory) wrote the other."""
    if not run.duplicate_blocks:
        return None
    block, rank = run.duplicate_blocks[0]
    return make_failure(FailureClass.PROTOCOL_VIOLATION,
                        f"rank {rank} answered block {block} twice: something other than the harness "
                        "wrote to its status channel", rank=rank)


def finite_number(value: Any) -> Optional[float]:
    """A number a rank sent (a JSON int or float), as a finite float; None for anything else. A
    whole number of 400 digits made ``float`` raise OverflowError, a string ValueError, and the
    evaluation ended with no verdict; NaN or Infinity reached the report, which is no JSON then
    (red team, sixth pass: forges_huge_call_times, reports_a_huge_compile_time)."""
    if type(value) not in (int, float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def milliseconds(values: Any, count: Optional[int], *, signed: bool = False) -> Optional[list[float]]:
    """A rank's list of times as the harness sends it (``count`` of them, where given), each a
    finite number of milliseconds (not negative, unless ``signed``); None otherwise. Ranks judged
    in their own process send these with the token, which candidate code can read."""
    if not isinstance(values, list) or (count is not None and len(values) != count):
        return None
    times = [finite_number(value) for value in values]
    if any(ms is None or (ms < 0 and not signed) for ms in times):
        return None
    return times  # type: ignore[return-value]


class DrivenFailure(Exception):
    def __init__(self, side: str, failure: Failure) -> None:
        super().__init__(failure["message"])
        self.side = side
        self.failure = failure


class PairedTimer:
    beside: Optional[Any] = None  # see __init__
    def __init__(self, candidate: SideRun, reference: SideRun, cfg: TimingConfig, *,
                 step_s: float, snapshot: Optional[Callable[[], Any]] = None, clock: str = "ranks",
                 beside: Optional[Any] = None) -> None:
        self.cand = SideBlocks(candidate, "candidate")
        # Judged in the ranks: what freezes the candidate around each of the reference's blocks
        # and reads it after (judge/beside.py FrozenBeside); None where nothing does.
        self.beside = beside
        self.ref = SideBlocks(reference, "reference")
        self.cfg = cfg
        # Which clock the ratios come from. ``ranks``: what the ranks timed around each call
        # (CUDA events; bounded by our wall clock in scoring.py). ``parent``: our wall clock per
        # call, harness work included; on CPU a rank's clock is candidate code's to rebind, and
        # the harness work is too noisy there to tell a forged time from a slow host.
        self.clock = clock
        self.step_s = step_s  # the longest a single call may take before it counts as hung
        # Taken right after the warm-up and right after the last round, while the GPUs are busy
        # (an idle GPU drops its clocks within moments, and would look like a moved clock).
        self.snapshot = snapshot
        self.snapshots: tuple[Any, Any] = (None, None)
        self.block_id = 0

    # -- waiting on the sides -------------------------------------------------------------
    def _check(self, side: SideBlocks, timeout: float) -> None:
        failure = side.run.poll(timeout)
        if failure is not None:
            raise DrivenFailure(side.name, failure)

    def wait_ready(self, side: SideBlocks) -> None:
        """Until every rank of ``side`` waits for a command; the other side is watched meanwhile."""
        other = self.ref if side is self.cand else self.cand
        while not side.run.waiting():
            self._check(side, 0.05)
            self._check(other, 0)

    # -- one block --------------------------------------------------------------------------
    def block(self, side: SideBlocks, calls: int) -> Block:
        """One block of ``side``'s; the reference's with the candidate frozen (``beside``), read
        before any failure of the block is raised: a reference starved by the candidate's helpers
        past its deadline is the candidate's doing, not ours."""
        beside = self.beside if side is self.ref else None
        if beside is None:
            return self._block(side, calls)
        what = f"timed block {self.block_id + 1}"
        beside.freeze(what)
        try:
            block = self._block(side, calls)
        except DrivenFailure as exc:
            if exc.side == "reference":
                beside.read(what)
            raise
        beside.thaw(what)
        return block

    def _block(self, side: SideBlocks, calls: int) -> Block:
        self.block_id += 1
        block_id = self.block_id
        expected_s = calls * side.per_call_ms / 1e3
        sent = time.perf_counter()
        side.run.command({"cmd": "block", "calls": calls, "block": block_id},
                         within_s=self.step_s + 20 * expected_s)
        self.wait_ready(side)
        wall_ms = (time.perf_counter() - sent) * 1e3
        if (twice := answered_twice(side.run)) is not None:
            raise DrivenFailure(side.name, twice)
        ranks = len(side.run.ranks)
        events = [side.run.blocks.get((block_id, rank)) for rank in range(ranks)]
        times = [milliseconds(e.get("times_ms"), calls) if e is not None else None for e in events]
        # One gap per call, as the harness sends them (or none): a longer list is a forged answer.
        gaps = [milliseconds(e.get("gap_ms") or [], calls if e.get("gap_ms") else None, signed=True)
                if e is not None else None for e in events]
        copies = events[0].get("copies") if events[0] is not None else None
        if any(e is None or t is None or g is None or e.get("first_call") != side.calls
               for e, t, g in zip(events, times, gaps)) or not (copies is None or type(copies) is int and copies >= 0):
            raise DrivenFailure(side.name, make_failure(
                FailureClass.PROTOCOL_VIOLATION,
                f"the {side.name}'s ranks did not report the {calls} calls of timed block {block_id} "
                "as the harness sends them"))
        side.copies = copies or 0
        self.keep_digests(side, block_id, calls, events)  # type: ignore[arg-type]
        side.calls += calls
        return Block(calls, times, gaps, wall_ms)  # type: ignore[arg-type]

    def keep_digests(self, side: SideBlocks, block_id: int, calls: int, events: list[dict[str, Any]]) -> None:
        """Each rank's digests of what every slot the block wrote keeps at its end (its latest
        call there): exactly those calls, or the block's answer was not the harness's."""
        copies = max(side.copies, 1)
        expected = {side.calls + i: None for i in range(max(0, calls - copies), calls)}
        per_rank: list[dict[int, list[str]]] = []
        for event in events:
            found = event.get("digests")
            try:
                digests = {int(call): list(map(str, values)) for call, values in found}  # type: ignore[union-attr]
            except (TypeError, ValueError):
                digests = {}
            if set(digests) != set(expected):
                raise DrivenFailure(side.name, make_failure(
                    FailureClass.PROTOCOL_VIOLATION,
                    f"the {side.name}'s ranks did not digest the outputs that timed block {block_id} "
                    "left in each slot"))
            per_rank.append(digests)
        for call in expected:
            side.digests[call % copies] = (call, [digests[call] for digests in per_rank])

    def warm_up(self) -> None:
        """Blocks of doubling size, alternating sides, until each has run its minimum calls for its
        minimum time: clocks ramp up, caches and allocators settle, and we learn a call's cost."""
        started = {id(self.cand): time.monotonic(), id(self.ref): time.monotonic()}
        size = {id(self.cand): 1, id(self.ref): 1}
        spent = {id(self.cand): 0.0, id(self.ref): 0.0}
        pending = [self.cand, self.ref]
        while pending:
            for side in list(pending):
                began = time.monotonic()
                block = self.block(side, size[id(side)])
                spent[id(side)] += time.monotonic() - began
                side.per_call_ms = block.median_ms
                size[id(side)] = min(size[id(side)] * 2, self.cfg.max_block_calls)
                if side.calls >= self.cfg.warmup_iterations and spent[id(side)] >= self.cfg.warmup_time_s:
                    pending.remove(side)
                elif time.monotonic() - started[id(side)] > 10 * max(self.cfg.warmup_time_s, 1.0):
                    pending.remove(side)  # a very slow call: the warm-up has had its time
        for side in (self.cand, self.ref):
            side.warmup_calls = side.calls

    def block_calls(self, sides: Optional[tuple[SideBlocks, ...]] = None) -> int:
        """Calls per block, the same on both sides (a block's median then has the same meaning on
        both), enough that the slower of ``sides`` (default: both) lasts about ``block_time_s``."""
        slower = max(*(side.per_call_ms for side in (sides or (self.cand, self.ref))), 1e-6)
        wanted = math.ceil(self.cfg.block_time_s * 1e3 / slower)
        return max(self.cfg.min_block_calls, min(self.cfg.max_block_calls, wanted))

    # -- the rounds -------------------------------------------------------------------------
    def run(self) -> PairedTiming:
        self.wait_ready(self.cand)
        self.wait_ready(self.ref)
        self.warm_up()
        # The reference's warm-up alone sizes the first round: a candidate's warm-up is its own to
        # make slow (red team: slow only there, it shrank both sides' blocks to a few calls, and the
        # per-block cost pulled its ratio towards 1). After that, both sides' timed blocks, which a
        # candidate can only make slow by being scored slow.
        calls = self.block_calls((self.ref,))
        rounds: list[dict[str, float]] = []
        before = self.busy_snapshot()
        started = time.monotonic()
        reason = "round_cap"
        while len(rounds) < self.cfg.max_rounds:
            order = (self.cand, self.ref) if len(rounds) % 2 == 0 else (self.ref, self.cand)
            blocks = {}
            for side in order:
                blocks[id(side)] = self.block(side, calls)
                side.counted.append(blocks[id(side)])
            cand_ms, ref_ms = blocks[id(self.cand)].time_ms(self.clock), blocks[id(self.ref)].time_ms(self.clock)
            self.cand.per_call_ms, self.ref.per_call_ms = cand_ms, ref_ms
            calls = self.block_calls()
            # A call can time at 0 on a coarse clock: floor it at a nanosecond.
            rounds.append({"candidate_ms": cand_ms, "reference_ms": ref_ms, "ratio": ref_ms / max(cand_ms, 1e-6)})
            if len(rounds) >= self.cfg.min_rounds:
                ratios = [r["ratio"] for r in rounds]
                median = statistics.median(ratios)
                interval = median_interval(ratios, resamples=RESAMPLES // 2)
                if (interval[1] - interval[0]) / 2 <= self.cfg.target_half_width * median:
                    reason = "converged"
                    break
            # The time cap waits for the minimum of rounds (an interval of fewer means little),
            # unless rounds are so slow that four caps have passed.
            spent = time.monotonic() - started
            if spent >= self.cfg.max_time_s and (len(rounds) >= self.cfg.min_rounds or spent >= 4 * self.cfg.max_time_s):
                reason = "time_cap"
                break
        seconds = time.monotonic() - started
        self.snapshots = (before, self.busy_snapshot())
        ratios = [r["ratio"] for r in rounds]
        return PairedTiming(clock=self.clock, rounds=rounds, speedup=statistics.median(ratios),
                            interval=median_interval(ratios, resamples=RESAMPLES), stop_reason=reason,
                            seconds=seconds, candidate=self.cand, reference=self.ref)

    def busy_snapshot(self) -> Any:
        """The snapshot, taken while the candidate runs an uncounted block of about
        SNAPSHOT_BLOCK_S: nvidia-smi samples for a while, and a GPU left waiting meanwhile drops
        its clocks and says it is idle."""
        if self.snapshot is None:
            return None
        result: list[Any] = [None]
        reader = threading.Thread(target=lambda: result.__setitem__(0, self.snapshot()), daemon=True)
        reader.start()
        calls = max(1, math.ceil(SNAPSHOT_BLOCK_S * 1e3 / max(self.cand.per_call_ms, 1e-6)))
        while reader.is_alive():
            self.block(self.cand, min(calls, self.cfg.max_block_calls * 10))
        reader.join()
        return result[0]

    # -- the end ----------------------------------------------------------------------------
    def kept_calls(self, slots: list[int]) -> list[int]:
        """The candidate's latest call in each of ``slots``: the ones it saved."""
        total, count = self.cand.calls, self.cand.copies
        calls = []
        for slot in slots:
            if slot < total:
                calls.append(slot + (total - 1 - slot) // count * count)
        return sorted(calls)

    def secret_slots(self, checked: int) -> list[int]:
        """Which slots' latest calls are checked: drawn here, when timing is over, in secret."""
        slots = list(range(max(self.cand.copies, 1)))
        chosen = []
        while slots and len(chosen) < checked:
            chosen.append(slots.pop(secrets.randbelow(len(slots))))
        return sorted(chosen)


def side_iterations(side: SideBlocks, clock: str = "ranks") -> tuple[list[float], list[float], list[float]]:
    """Counted iterations (slowest rank each; on the parent's clock, each call's share of its
    block's wall time), per-rank medians as the ranks timed them, and every rank's gaps."""
    if clock == "ranks":
        iterations = [t for block in side.counted for t in block.iterations_ms]
    else:
        iterations = [block.wall_per_call_ms for block in side.counted for _ in range(block.calls)]
    ranks = len(side.counted[0].per_rank_ms) if side.counted else 0
    per_rank = [statistics.median([t for block in side.counted for t in block.per_rank_ms[r]])
                for r in range(ranks)]
    gaps = [g for block in side.counted for rank in block.gaps_ms for g in rank]
    return iterations, per_rank, gaps


def unaccounted_ms(side: SideBlocks) -> float:
    """The median over a side's counted blocks of its unaccounted time per call."""
    return statistics.median(block.unaccounted_ms for block in side.counted) if side.counted else 0.0


def wait_started(name: str, runs: dict[str, SideRun]) -> None:
    """Until every rank of ``runs[name]`` waits for its first command; every side is watched
    meanwhile, and a failure is blamed on the side it happened in (each side is polled under its
    own name: the reference's failures are ours, the candidate's are not)."""
    run = runs[name]
    while not run.waiting():
        for other_name, other in runs.items():
            failure = other.poll(0.05 if other is run else 0)
            if failure is not None:
                raise DrivenFailure(other_name, failure)


def wait_finished(run: SideRun) -> Optional[Failure]:
    """Until every rank of ``run`` said done and exited, or it failed."""
    while not run.finished():
        failure = run.poll(0.1)
        if failure is not None:
            return failure
    return None
