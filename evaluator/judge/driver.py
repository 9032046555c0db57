"""The judge driving both sides of a CPU evaluation: trials, then timed rounds, all from here.

Every command goes to a side that stands frozen with the first call's inputs already in its
buffer; the judge's clock starts before the side is thawed and stops once it is frozen again after
its answer, so all of the side's work, whatever thread or process does it, is on the clock. The
other side stays frozen throughout: no side runs while the other is timed.

Within a block the judge releases inputs one call at a time: a rank that says a call is done gets
the next call's inputs only after the judge has decided whether that call is checked and, if so,
copied its outputs. A call's inputs therefore never exist before the call before it has answered,
so a block cannot be answered by one batched computation (tests/evaluator/hostile/
batches_the_block.py: 1.4-1.6x on CPU before), and what the judge copied cannot be changed by
anything done later. The checked calls are a uniform random sample of the counted timed calls
(reservoir sampling, the judge's own secret randomness, decided once the call returned); the
reference recomputes exactly those. The reference's blocks get the same round trips and, call for
call, as many copies (a shadow sample thrown away), so neither side carries the other's costs.
After each block the judge compares every input with its own copy.
"""

from __future__ import annotations

import hashlib
import io
import secrets
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import torch

from ..config import TimingConfig
from ..exact import split_exact_parts
from ..job import CHECKED_CALLS, call_seed
from ..launcher import SideRun
from ..paired import Block, DrivenFailure, PairedTimer, SideBlocks, answered_twice
from ..report import FailureClass, make_failure
from .buffers import OutputError, RankBuffers, WrittenCall
from .host_files import starved as files_starved
from .host_tcp import starved
from .inputs import InputMaker
from .liveness import ended_since, ran_since
from .quiet import DeviceQuiet

# One rank and side's shared buffers (a ring of input regions and output slots, reused call after
# call) stay within this, and so do the judge's own copies of a block's inputs (calls per block are
# cut to fit those): host memory on CPU; on a GPU, memory of the rank's GPU (both sides', buffers
# and copies: 16 GiB of an H100's 80).
BUFFER_BUDGET_BYTES = 1 << 30
GPU_BUFFER_BUDGET_BYTES = 4 << 30
# Released by block, every call of a block takes a region and an output slot (4 x the problem's HBM
# bytes: 832 MiB a call for the default all-reduce): 16 GiB per rank and side of a GPU's memory
# gives 19 calls a block there, 34 GiB of an H100's 80 with both sides and the judge's copies.
GPU_BLOCK_BUDGET_BYTES = 16 << 30
# The candidate's outputs that the judge holds in memory until the timing is over (its copies,
# on the rank's GPU or in host memory), before it writes them out: beyond this it writes as it goes.
HOLD_BYTES_CPU = 1 << 30
HOLD_BYTES_PER_GPU = 4 << 30
# Processor time a stopped side may seem to use while the other is timed: /proc counts in ticks of
# 10 ms, and a stopped process gets none; two allow for a tick read as it turned.
FROZEN_CPU_S = 0.02
# Run time the threads of a stopped side may seem to add while the other is timed, counted in
# nanoseconds (/proc's schedstat): none at all. The margin of 1 ms this once allowed (for a reading
# taken as a thread finished stopping) was 0 ns in every honest reading (348, sandbox on and off),
# and a helper woken under it ran unseen beside every reference block: on a GPU, time enough to
# launch a kernel that runs beside the reference (red team, spins_under_the_margin).
FROZEN_RUN_NS = 1
# The same after a side's own freeze, while the judge reads what its block left: the freeze has
# seen every thread stopped before the first reading, so any run time at all (a nanosecond) is a
# thread that was continued.
FROZEN_READ_RUN_NS = 1
# Regions and slots in the ring: a few, so that a call's region has stood a while before it is
# written again (nothing depends on more than one).
RING_REGIONS = 4


@dataclass
class CheckedCalls:
    """A uniform sample of the counted timed calls, kept as they happen (reservoir sampling)."""

    size: int
    seen: int = 0
    kept: list[int] = field(default_factory=list)
    rng: secrets.SystemRandom = field(default_factory=secrets.SystemRandom)

    def offer(self, call: int) -> tuple[bool, Optional[int]]:
        """Whether to keep ``call``, and which kept call it replaces (None: none)."""
        self.seen += 1
        if len(self.kept) < self.size:
            self.kept.append(call)
            return True, None
        slot = self.rng.randrange(self.seen)
        if slot >= self.size:
            return False, None
        dropped, self.kept[slot] = self.kept[slot], call
        return True, dropped


@dataclass(frozen=True)
class BlockPhases:
    """One timed block on the judge's clock, in seconds: thawing the side; its calls, from the
    first command to its answer, and of that the judge's own work between a rank's "called" and
    its "go" (copying a drawn call's outputs, comparing the inputs a region held, writing the next
    call's; summed over ranks, as the judge does it rank after rank); freezing it; and, on GPUs,
    waiting until its devices are quiet."""

    calls: int
    thaw: float
    run: float
    freeze: float
    quiet: float
    releasing: float

    @property
    def seconds(self) -> float:
        """The block's whole time on the judge's clock."""
        return self.thaw + self.run + self.freeze + self.quiet


def phase_summary(phases: list[BlockPhases]) -> dict[str, float]:
    """Medians over a side's timed blocks, in ms; ``per_call``: the block's whole time per call;
    ``run_per_call``: its run phase per call (a median of per-block ratios: the median run over
    the median calls is not bounded by ``per_call`` when blocks differ in length)."""
    def median_ms(values: list[float]) -> float:
        return round(statistics.median(values) * 1e3, 4)
    return {"blocks": len(phases), "calls": statistics.median(p.calls for p in phases),
            "thaw": median_ms([p.thaw for p in phases]), "run": median_ms([p.run for p in phases]),
            "freeze": median_ms([p.freeze for p in phases]), "quiet": median_ms([p.quiet for p in phases]),
            "releasing": median_ms([p.releasing for p in phases]),
            "per_call": median_ms([p.seconds / p.calls for p in phases]),
            "run_per_call": median_ms([p.run / p.calls for p in phases])}


def hold_budget(device: str, world_size: int) -> int:
    """Bytes of the candidate's outputs the judge may hold in memory (``Judge.save_outputs``)."""
    return HOLD_BYTES_CPU if device == "cpu" else HOLD_BYTES_PER_GPU * world_size


def pass_probability_bound(checked: int, honest_fraction: float) -> float:
    return honest_fraction ** checked


def check_stood_still(before: dict[tuple[int, int], int], after: dict[tuple[int, int], int], limit_ns: int,
                      when: str, gain: str) -> None:
    """The candidate's protocol_violation if its threads ran ``limit_ns`` or more between two
    readings (``liveness.thread_run_ns``) taken while it stood stopped: ``when`` says where that
    was, ``gain`` what such work wins.

    A thread of the first reading gone from the second ended meanwhile, and ending takes running:
    that too is the candidate's protocol_violation. Its run time leaves with it, so the sum alone
    passed over it: helpers continued by their own SIGCONT timers starved the reference's start-up
    for 22 s and exited before the second reading, unread, and the evaluation's time ran out in
    the reference's blocks as our harness_error (red team, starves_the_reference_start_while_frozen).
    Every reading of a stopped candidate comes here (``Judge.read_still``, the reference's start-up)."""
    if (ended := ended_since(before, after)):
        raise DrivenFailure("candidate", make_failure(
            FailureClass.PROTOCOL_VIOLATION,
            f"{ended} of the candidate's threads ended {when} (a process continued by a SIGCONT it had "
            f"sent itself, or killed by a timer it armed, say: {gain})"))
    if (ran := ran_since(before, after)) >= limit_ns:
        how_long = f"{ran / 1e6:.3f} ms" if ran >= 1_000 else f"{ran} ns"
        raise DrivenFailure("candidate", make_failure(
            FailureClass.PROTOCOL_VIOLATION,
            f"the candidate's threads ran for {how_long} {when} (a process continued by a SIGCONT "
            f"it had sent itself, say: {gain})"))


def check_host_pools(candidate: SideRun, when: str) -> None:
    """The kernel's pools that no namespace splits, read while the candidate stands stopped and
    before the reference runs beside it: the host's TCP memory and its table of open files."""
    check_host_tcp(candidate, when)
    check_host_files(candidate, when)


def check_host_files(candidate: SideRun, when: str) -> None:
    """The candidate's resource_limit if the host's one table of open files is so full while it
    stands stopped, its own processes holding a share, that the reference could not open its own
    (red team, fills_the_hosts_file_table: judge/host_files.py)."""
    if (why := files_starved(candidate.box.process_ids() if candidate.box is not None else [])) is not None:
        raise DrivenFailure("candidate", make_failure(FailureClass.RESOURCE_LIMIT, f"{why} ({when})"))


def check_host_tcp(candidate: SideRun, when: str) -> None:
    """The candidate's resource_limit if the host's one pool of TCP memory is so full while it
    stands stopped, its own sockets holding a share, that the reference would run starved (red
    team, fills_the_hosts_tcp_memory: judge/host_tcp.py)."""
    # The side's network namespace, read where its init (confined) or the judge (unconfined) sees it.
    init = candidate.box.reaper_id() if getattr(candidate.box, "confined", False) else None
    if (why := starved(candidate.host_tcp_at_start, f"/proc/{init}/net" if init else "/proc/self/net")) is not None:
        raise DrivenFailure("candidate", make_failure(FailureClass.RESOURCE_LIMIT, f"{why} ({when})"))


class Judge:
    """Owns the buffers of both sides and speaks to their ranks only through commands."""

    def __init__(self, maker: InputMaker, may_overwrite: tuple[str, ...], outputs_dir: Path,
                 buffers: dict[str, list[RankBuffers]], step_s: float,
                 on_progress: Optional[Callable[[str, dict[str, Any]], None]] = None,
                 quiet: Optional[DeviceQuiet] = None, keep_budget: Optional[int] = None,
                 hold_budget: int = 0, release: str = "call") -> None:
        self.on_progress = on_progress  # the judge says how far it got: ranks' words are not read
        self.maker = maker
        self.may_overwrite = may_overwrite
        self.outputs_dir = outputs_dir  # the candidate's outputs, as the judge copied them
        self.keep_budget = keep_budget  # bytes of them it may hold at once (host memory)
        self.kept_bytes: dict[str, int] = {}  # label -> bytes saved under it
        # label -> copies kept in memory, judged from there (Evaluation.judge): only what the
        # holding budget leaves out is written to a file
        self.held: dict[str, list[list[torch.Tensor]]] = {}
        self.hold_budget = hold_budget
        self.release = release  # "call": inputs call by call; "block": all before the block
        # File name -> the SHA-256 of what the judge wrote there, taken from its own copy in memory
        # (``guard_files``: only where the candidate ran unconfined, with the evaluator's rights
        # on this disk; the comparison holds each file to it, red team, rewrites_judge_files).
        self.guard_files = False
        self.written: dict[str, str] = {}
        self.buffers = buffers
        self.step_s = step_s
        self.checked = CheckedCalls(CHECKED_CALLS)
        self.shadow = CheckedCalls(CHECKED_CALLS)  # the reference's: copied alike, then thrown away
        self.block_id = 0
        # The candidate's last reading since it was frozen (``read_still``): from its freeze to its
        # next thaw every reading is compared with the one before, so no window goes unread.
        self.frozen_run: Optional[tuple[SideRun, dict[tuple[int, int], int]]] = None
        # The candidate's input comparisons queued during a block: (rank, call, input, flag).
        self.pending_changes: list[tuple[int, str, str, torch.Tensor]] = []
        self.quiet = quiet  # GPUs: the clock stops only once the side left no work on them
        # Where each timed block's time went, per side: so that the judge's own cost per call can
        # be read beside a bare loop's (docs/judge.md), from the report alone.
        self.phases: dict[str, list[BlockPhases]] = {"candidate": [], "reference": []}

    # -- one command ----------------------------------------------------------------------
    def stage(self, side: str, seeds: list[int]) -> list[list[WrittenCall]]:
        """Each rank's inputs for calls with these seeds, made and kept by us; none released."""
        return [[rank_buffers.stage_inputs(i, self.maker.make(rank, seed)) for i, seed in enumerate(seeds)]
                for rank, rank_buffers in enumerate(self.buffers[side])]

    def run_calls(self, run: SideRun, other: Optional[SideRun], side: str, written: list[list[WrittenCall]],
                  within_s: float, what: str, builds: bool = False,
                  on_called: Optional[Callable[[int, int], None]] = None,
                  names: Optional[list[str]] = None, exact_span: int = 0) -> BlockPhases:
        """Release the first call's inputs, thaw the side, have it run the calls: once every rank
        has returned a call, ``on_called(rank, call)`` takes what it wants of it for each rank and
        the next call's inputs are released to all; wait for the answer, freeze the side: where
        our clock's time went. Released by block (``self.release``), every call's inputs are in
        their own regions before the thaw, the ranks run the calls without a word between them,
        and ``on_called`` is the caller's business once the side stands frozen."""
        self.block_id += 1
        block = self.block_id
        by_block = self.release == "block"
        for rank_buffers in self.buffers[side]:
            rank_buffers.new_block()  # the rank lets the last block's outputs in its heap go now
        # No barrier in the ranks ("align": False): a step only the harness takes is one the
        # candidate can delete from its own process and be scored faster for (red team,
        # skips_the_alignment). The judge holds the barrier instead: no rank gets call i + 1
        # before every rank has returned call i.
        span = max(exact_span, 1)  # re-checks: each call's outputs and exact records in ``span`` slots
        commands = [{"cmd": "calls", "block": block, **({"release": "block"} if by_block else {}),
                     "calls": [{"inputs": w.manifest, "slot": self.buffers[side][rank].slot(i * span), "align": False,
                                "capacity": span * self.buffers[side][rank].slot_bytes,
                                **({"exact": True} if exact_span else {})} for i, w in enumerate(calls)]}
                    for rank, calls in enumerate(written)]
        for rank, calls in enumerate(written):
            for call in calls if by_block else calls[:1]:
                self.buffers[side][rank].release(call, wait=False)
        for rank_buffers in self.buffers[side]:
            rank_buffers.settle()
        last = len(written[0]) - 1
        released = [last if by_block else 0] * len(written)  # per rank: the last call whose inputs it has
        run.take_called()  # a stale claim from an earlier block releases nothing
        # The candidate stands frozen while the reference is timed: its processor time must not
        # move meanwhile. Nothing of it is read during the block (its pipes wait): lines it left
        # there would cost the judge time on the reference's clock.
        watched = other if other is not None and side == "reference" else None
        frozen_cpu = watched.cpu_seconds() if watched is not None else 0.0
        if watched is not None:
            self.read_still(watched, f"while they stood stopped, before the reference's {what}",
                            "work that escapes the freeze runs beside the other side")
            check_host_pools(watched, f"before the reference's {what}")
        elif side == "candidate":
            # Read before the clock starts: the candidate stood still since its last freeze, up to
            # this thaw (the window after the reference's last reading went unread before).
            self.read_still(run, f"while they stood stopped, before their {what}",
                            "work before the block, off the clock")
            self.frozen_run = None
        started = time.perf_counter()
        run.thaw()
        thawed = time.perf_counter()
        run.command_each(commands, within_s=within_s, what=what, builds=builds)
        releasing = 0.0  # of the run phase: the judge's own work between a rank's "called" and "go"
        ranks = len(written)
        returned: set[int] = set()  # the ranks that have returned the call they run now

        def failed(failure: Any) -> DrivenFailure:
            """The side's failure, unless the candidate stood stopped beside the reference and ran:
            the reference's failure is ours, and the reading after its block used to come only once
            the block was over. Helpers woken by their own timers inside a reference block starved
            it past its deadline, and a wrong candidate ended as our harness_error, unread (red
            team, starves_a_reference_block_past_its_deadline; the start-up's reading already came
            first, Evaluation.start_beside_frozen)."""
            if watched is not None:
                self.read_still(watched, f"while they stood stopped, during the reference's {what}",
                                "work that escapes the freeze runs beside the other side", FROZEN_RUN_NS)
            return DrivenFailure(side, failure)

        while not run.waiting():
            failure = run.poll(0.02 if last == 0 else 0.002)
            if failure is not None:
                raise failed(failure)
            for rank, said_block, call in run.take_called():
                if said_block != block or call != released[rank] or call >= last:
                    continue  # not the call this rank runs now: a claim that releases nothing
                returned.add(rank)
                if len(returned) < ranks:
                    continue
                # Every rank has returned this call: only now is it drawn or not and its slots
                # copied, so no rank can learn the draw (from how long its "go" took) while a
                # peer's outputs for the same call are still its own to change (red team,
                # learns_the_draw_from_a_peer).
                took = time.perf_counter()
                for each in range(ranks):
                    if on_called is not None:
                        on_called(each, call)
                    self.check_before_reuse(side, each, written[each], call + 1, names)
                    self.buffers[side][each].release(written[each][call + 1], wait=False)
                    released[each] = call + 1
                # Every rank's GPU work queued first, then one wait per GPU: the ranks' GPUs copy
                # at once, not one after the other.
                for each in range(ranks):
                    self.buffers[side][each].settle()
                for each in range(ranks):
                    run.send_to(each, {"cmd": "go", "block": block, "call": call + 1})
                returned.clear()
                releasing += time.perf_counter() - took
        answered = time.perf_counter()
        if not run.freeze():
            raise failed(make_failure(
                FailureClass.PROTOCOL_VIOLATION,
                f"the {side}'s processes could not all be stopped after its calls (a process that cannot "
                "be stopped keeps running while the other side is timed)"))
        frozen = time.perf_counter()
        if self.quiet is not None and (busy := self.quiet.wait(within_s)) is not None:
            raise failed(make_failure(
                FailureClass.PROTOCOL_VIOLATION,
                f"the {side} left work running on GPU {busy} for {within_s:.0f} s after it answered "
                f"{what} and its processes were stopped (no side may run while the other is timed)"))
        phases = BlockPhases(last + 1, thawed - started, answered - thawed, frozen - answered,
                             time.perf_counter() - frozen, releasing)
        if side == "candidate":
            # The clock has stopped. From here on the judge reads what the block left (the last
            # call's outputs, the inputs), and nothing of the candidate may run meanwhile
            # (``check_stood_frozen``). Read before the clock stopped, it would have put the
            # judge's own /proc reads on the candidate's clock alone.
            self.frozen_run = (run, run.thread_run_ns())
        if watched is not None and (used := watched.cpu_seconds() - frozen_cpu) >= FROZEN_CPU_S:
            raise DrivenFailure("candidate", make_failure(
                FailureClass.PROTOCOL_VIOLATION,
                f"the candidate's processes used {used * 1e3:.0f} ms of processor while they stood stopped, "
                f"during the reference's {what} (work that escapes the freeze runs beside the other side)"))
        if watched is not None:  # threads that ran or ended beside the reference's block
            self.read_still(watched, f"while they stood stopped, during the reference's {what}",
                            "work that escapes the freeze runs beside the other side", FROZEN_RUN_NS)
        if (twice := answered_twice(run)) is not None:
            raise DrivenFailure(side, twice)
        if by_block:
            # Nothing tells the judge where a rank is inside the block: a call it skipped leaves its
            # slot without its answer, which the draw finds with the probability pass_bound gives.
            return phases
        # Answered before its last call: the judge had not released it yet, or the answer came in
        # the stream before the "called" of every earlier call (it then arrives in the same read
        # as the last release, and the clock would stop with a call still to run).
        answered = [min(done, state.answered_after if state.answered_after is not None else done)
                    for done, state in zip(released, run.ranks)]
        if (short := next((rank for rank, done in enumerate(answered) if done != last), None)) is not None:
            raise DrivenFailure(side, make_failure(
                FailureClass.PROTOCOL_VIOLATION,
                f"rank {short} answered {what} after {answered[short] + 1} of its {last + 1} calls: the "
                "harness answers a block after its last call", rank=short))
        return phases

    def check_stood_frozen(self, what: str) -> None:
        """The candidate's threads ran not at all since its last block's freeze, while the judge
        read that block's outputs and inputs. A process continued by a SIGCONT it had a timer
        send could otherwise rewrite the last call's slot, or its inputs, between the freeze and
        those reads: the last call answered off the clock."""
        if self.frozen_run is not None:
            self.read_still(self.frozen_run[0],
                            f"after they were stopped at the end of {what}, while the judge read its outputs",
                            "work after the answer, off the clock")

    def read_still(self, run: SideRun, when: str, gain: str, limit_ns: int = FROZEN_READ_RUN_NS) -> None:
        """Read the candidate's threads and hold them to the reading before, since its freeze
        (``check_stood_still``: none may have run ``limit_ns`` or ended); this reading becomes the
        next one's base.

        Readings taken only around the reference's blocks and the judge's reads left two windows
        unread: from the judge's reads after a candidate block to the reference block's first
        reading, and from that block's last reading to the candidate's thaw. A helper woken by its
        own timer in one of them ran unseen (red team, seventh pass: spins_under_the_margin passed
        at 1.39x once in a full run of the suite)."""
        now = run.thread_run_ns()
        if self.frozen_run is not None and self.frozen_run[0] is run:
            check_stood_still(self.frozen_run[1], now, limit_ns, when, gain)
        self.frozen_run = (run, now)

    # -- what the judge reads back ------------------------------------------------------------
    def check_inputs(self, written: list[list[WrittenCall]], what: list[str]) -> None:
        """After a block: the comparisons queued as regions were reused, then the calls whose
        inputs are still in their regions (the ring's last)."""
        pending, self.pending_changes = self.pending_changes, []
        for rank, call_name, name, differs in pending:
            if bool(differs):
                raise self.mutation(rank, name, call_name)
        for rank, calls in enumerate(written):
            ring = self.buffers["candidate"][rank].calls
            for i in range(max(0, len(calls) - ring), len(calls)):
                self.check_call_inputs(rank, calls[i], what[i])

    def check_call_inputs(self, rank: int, call: WrittenCall, what: str) -> None:
        changed = self.buffers["candidate"][rank].changed_inputs(call, self.may_overwrite)
        if changed:
            raise self.mutation(rank, changed[0], what)

    def mutation(self, rank: int, name: str, what: str) -> DrivenFailure:
        return DrivenFailure("candidate", make_failure(
            FailureClass.INPUT_MUTATION,
            f"rank {rank}: input `{name}` was modified in {what}; only "
            f"{list(self.may_overwrite) or 'no inputs'} may be overwritten", rank=rank))

    def check_before_reuse(self, side: str, rank: int, calls: list[WrittenCall], nxt: int,
                           names: Optional[list[str]]) -> None:
        """Call ``nxt`` takes the region of call ``nxt - ring``: that call's inputs are compared
        first (queued before the region is written again, read by ``check_inputs`` after the
        block), as the block's last calls are after it. The reference's are compared alike and
        the answer dropped, so that both sides' clocks carry the same work."""
        earlier = nxt - self.buffers[side][rank].calls
        if earlier < 0:
            return
        changes = self.buffers[side][rank].input_changes(calls[earlier], self.may_overwrite)
        if side == "candidate":
            what = names[earlier] if names else f"call {earlier}"
            self.pending_changes.extend((rank, what, name, differs) for name, differs in changes)

    def copy_outputs(self, side: str, rank: int, call: int, what: str) -> list[torch.Tensor]:
        try:
            return self.buffers[side][rank].read_outputs(call)
        except OutputError as exc:
            raise DrivenFailure(side, make_failure(
                FailureClass.PROTOCOL_VIOLATION, f"rank {rank}, {what}: {exc}", rank=rank)) from None
        except Exception as exc:  # noqa: BLE001 - the slot's bytes are the side's: no parse of them may end the judge
            raise DrivenFailure(side, make_failure(
                FailureClass.PROTOCOL_VIOLATION,
                f"rank {rank}, {what}: the outputs' description is not the harness's "
                f"({type(exc).__name__})", rank=rank)) from None

    def save_outputs(self, label: str, outputs: list[list[torch.Tensor]]) -> None:
        """Keep the judge's copy of a call's outputs for the comparison: in memory while the
        holding budget lasts (writing them out between blocks would stretch every round of the
        timing: a drawn call may be dropped again before the end), written out otherwise."""
        size = sum(t.numel() * t.element_size() for rank_outputs in outputs for t in rank_outputs)
        self.check_keep_budget(size)
        in_memory = sum(self.kept_bytes[held_label] for held_label in self.held)
        if in_memory + size <= self.hold_budget:
            self.held[label] = outputs
        else:
            self.write_outputs(label, outputs)
        self.kept_bytes[label] = size

    def check_keep_budget(self, more: int) -> None:
        """What the judge keeps of the candidate's outputs, with ``more`` bytes besides, within
        its budget; past it the candidate's ``resource_limit``."""
        held = sum(self.kept_bytes.values()) + more
        if self.keep_budget is not None and held > self.keep_budget:
            raise DrivenFailure("candidate", make_failure(
                FailureClass.RESOURCE_LIMIT,
                f"the outputs the judge keeps to compare reached {held / 2**30:.1f} GiB, past the "
                f"{self.keep_budget / 2**30:.1f} GiB that this problem's outputs can take"))

    def write_outputs(self, label: str, outputs: list[list[torch.Tensor]]) -> None:
        try:
            for rank, rank_outputs in enumerate(outputs):
                path = self.outputs_dir / f"task0_{label}_rank{rank}.pt"
                if not self.guard_files:
                    torch.save([t.cpu() for t in rank_outputs], path)
                    continue
                # Unconfined, a candidate process can rewrite this file before it is compared (at
                # its finish, or from a process it left behind): the digest is of the bytes made
                # here, from our copy, before any of them reach the disk.
                data = io.BytesIO()
                torch.save([t.cpu() for t in rank_outputs], data)
                self.written[path.name] = hashlib.sha256(data.getbuffer()).hexdigest()
                path.write_bytes(data.getbuffer())
        except OSError as exc:  # the judge's memory-backed disk is full: the side's outputs filled it
            raise DrivenFailure("candidate", make_failure(
                FailureClass.RESOURCE_LIMIT, f"the judge could not keep the outputs of {label}: {exc}")) from None

    def drop_outputs(self, label: str) -> None:
        if self.held.pop(label, None) is None:
            for path in self.outputs_dir.glob(f"task0_{label}_rank*.pt"):
                path.unlink()
        self.kept_bytes.pop(label, None)

    # -- the phases ---------------------------------------------------------------------------
    def trials(self, run: SideRun, seeds: list[int]) -> None:
        """The candidate's correctness trials, one command each; every output is kept."""
        ranks = len(self.buffers["candidate"])
        for index, seed in enumerate(seeds):
            written = self.stage("candidate", [seed])
            self.run_calls(run, None, "candidate", written, within_s=self.step_s, what=f"trial {index}",
                           builds=True)
            self.check_inputs(written, [f"trial {index}"])
            outputs = [self.copy_outputs("candidate", rank, 0, f"trial {index}") for rank in range(ranks)]
            self.check_stood_frozen(f"trial {index}")
            self.save_outputs(f"trial{index}", outputs)
            self.progress("candidate", "step", f"trial {index}")

    def recheck_span(self) -> int:
        """Slots one re-check takes in the reference's ring: its outputs (at most half a slot, as
        every reference's are) and its exact records beside them (each residual at most twice an
        output's bytes, three of them where the problem has a decision band); 0 where the ring
        is too short to hold one (the reference then re-checks into files, as judged in the ranks)."""
        residuals = 3 if self.maker.problem.decision_band is not None else 1
        span = 1 + residuals * 2  # half-slots: outputs, then residuals of up to twice their bytes
        span = (span + 1) // 2 + 1  # whole slots, and one for the headers and the description
        ring = min(b.calls for b in self.buffers["reference"])
        return span if ring >= span else 0

    def recheck(self, run: SideRun, seeds: list[int], within_s: float,
                span: int) -> Iterator[tuple[int, list[tuple[list[torch.Tensor], list[dict[str, Any]]]]]]:
        """The reference's re-checks, once the candidate has ended: its outputs and exact records
        for the calls of these seeds, on the inputs the judge makes (the candidate's own bytes),
        as many a block as the ring holds, each read from the slots the reference wrote (no file is
        written, copied out of its sandbox or loaded). Yields each seed's index with, per rank,
        (outputs, records); the caller judges them before the next block overwrites them."""
        per_block = max(1, min(b.calls for b in self.buffers["reference"]) // span)
        for start in range(0, len(seeds), per_block):
            chunk = seeds[start:start + per_block]
            written = self.stage("reference", chunk)
            self.run_calls(run, None, "reference", written, within_s=within_s * len(chunk),
                           what=f"re-checks {start + 1}-{start + len(chunk)}", exact_span=span)
            for i in range(len(chunk)):
                yield start + i, [self.exact_outputs(rank, i, span) for rank in range(len(written))]

    def exact_outputs(self, rank: int, call: int, span: int) -> tuple[list[torch.Tensor], list[dict[str, Any]]]:
        try:
            return split_exact_parts(self.buffers["reference"][rank].read_outputs(call * span, span))
        except (OutputError, ValueError) as exc:  # the reference's own slot: ours, hence harness_error
            raise DrivenFailure("reference", make_failure(
                FailureClass.PROTOCOL_VIOLATION, f"rank {rank}: a re-check's slot is not what the harness "
                f"writes ({exc})", rank=rank)) from None

    def progress(self, side: str, event: str, step: str) -> None:
        if self.on_progress is not None:
            self.on_progress(side, {"event": event, "step": step, "task": 0})

    def timed_block(self, run: SideRun, other: SideRun, side: str, seeds: list[int], first_call: int,
                    counted: bool, within_s: float) -> float:
        """One timed block: each counted call is offered to the checked sample as its ranks say
        it is done, and a kept call's outputs are copied then (the last call's once the side is
        frozen); the reference's counted calls feed a shadow sample, copied the same way."""
        written = self.stage(side, seeds)
        sample = self.checked if side == "candidate" else self.shadow
        ranks, calls = len(written), len(seeds)
        decided: dict[int, tuple[bool, Optional[int]]] = {}
        copies: dict[int, list[Optional[list[torch.Tensor]]]] = {}
        copied = 0  # bytes of the candidate's outputs copied in this block, held until it ends

        def on_called(rank: int, call: int) -> None:
            nonlocal copied
            if not counted:
                return
            if call not in decided:
                decided[call] = sample.offer(first_call + call)
                copies[call] = [None] * ranks
            if decided[call][0]:
                copy = self.copy_outputs(side, rank, call, f"timed call {first_call + call}")
                copies[call][rank] = copy
                if side == "candidate":
                    # Held beside what is kept until the block ends: early on every call is
                    # drawn, so a block's copies count against the same budget as they are made
                    # (red team: calls x ranks x half a slot went uncounted until the block's end).
                    copied += sum(t.numel() * t.element_size() for t in copy)
                    self.check_keep_budget(copied)

        names = [f"timed call {first_call + i}" for i in range(calls)]
        phases = self.run_calls(run, other, side, written, within_s=within_s,
                                what=f"timed block {self.block_id + 1}", on_called=on_called, names=names)
        if counted:
            self.phases[side].append(phases)
        # The side stands frozen: the outputs still in their slots are final (released by block:
        # every call's; else the last call's, the others were drawn or not as they returned).
        for call in range(calls) if self.release == "block" else [calls - 1]:
            for rank in range(ranks):
                on_called(rank, call)
        if side == "candidate":
            self.check_inputs(written, names)
            self.check_stood_frozen(f"timed block {self.block_id}")
            kept = set(self.checked.kept)
            for call, (keep, dropped) in decided.items():
                if dropped is not None and dropped < first_call:
                    self.drop_outputs(f"timed{dropped}")  # saved by an earlier block
                if keep and first_call + call in kept:
                    self.save_outputs(f"timed{first_call + call}", copies[call])  # type: ignore[arg-type]
        return phases.seconds


class JudgedTimer(PairedTimer):
    """Paired rounds (paired.PairedTimer's schedule and stopping rule) on the judge's clock: a
    block is the judge's command to a thawed side, timed from before the thaw to after the freeze."""

    def __init__(self, judge: Judge, candidate: SideRun, reference: SideRun, cfg: TimingConfig, *,
                 step_s: float, timing_seed: int, max_calls: int) -> None:
        super().__init__(candidate, reference, cfg, step_s=step_s, clock="parent")
        self.judge = judge
        self.timing_seed = timing_seed
        self.max_calls = max_calls
        self.counting = False

    def warm_up(self) -> None:
        self.judge.progress("candidate", "step", "timing started")
        super().warm_up()
        self.counting = True

    def block(self, side: SideBlocks, calls: int) -> Block:
        calls = max(1, min(calls, self.max_calls))
        first = side.calls
        name = side.name
        expected_s = calls * side.per_call_ms / 1e3
        other = self.ref.run if side is self.cand else self.cand.run
        seconds = self.judge.timed_block(side.run, other, name,
                                         [call_seed(self.timing_seed, first + i) for i in range(calls)],
                                         first, self.counting, within_s=self.step_s + 20 * expected_s)
        side.calls += calls
        side.copies = self.max_calls
        ranks = len(side.run.ranks)
        per_call = seconds * 1e3 / calls
        return Block(calls, [[per_call] * calls for _ in range(ranks)], [[] for _ in range(ranks)], seconds * 1e3)


@dataclass(frozen=True)
class BlockShape:
    """``ring``: input regions and output slots in the shared buffers, call i using i % ring;
    ``calls``: the most calls one command may carry (each with its own inputs, made and kept by
    the judge before the block)."""

    ring: int
    calls: int


def calls_per_block(cfg: Optional[TimingConfig], call_bytes: int, slot_bytes: int, device: str = "cpu",
                    release: str = "call") -> BlockShape:
    """The block size the timing wants, within the budget: the ring within it, and the judge's
    copies of a block's inputs within it too. Released call by call, a region is written again
    only after the call before has returned and been copied: one region would do; a few cost
    nothing. Released by block, every call of a block has a region and a slot of its own."""
    wanted = cfg.max_block_calls if cfg is not None else 1
    budget = BUFFER_BUDGET_BYTES if device == "cpu" else GPU_BUFFER_BUDGET_BYTES
    if release == "block":
        budget = BUFFER_BUDGET_BYTES if device == "cpu" else GPU_BLOCK_BUDGET_BYTES
        calls = max(1, min(wanted, budget // max(call_bytes + slot_bytes, 1)))
        return BlockShape(calls, calls)
    ring = max(1, min(wanted, RING_REGIONS, budget // max(call_bytes + slot_bytes, 1)))
    return BlockShape(ring, max(ring, min(wanted, budget // max(call_bytes, 1))))
