"""The judge driving both sides of a CPU evaluation: trials, then timed rounds, all from here.

Every command goes to a side that stands frozen with the judge's inputs already in its buffer;
the judge's clock starts before the side is thawed and stops once it is frozen again after its
answer, so all of the side's work, whatever thread or process does it, is on the clock, and the
outputs the judge then reads cannot change. The other side stays frozen throughout: no side runs
while the other is timed. After each candidate block the judge compares every input with its
own copy and keeps a uniform random sample of the timed calls (reservoir sampling, its own
secret randomness, decided after the calls returned): the reference recomputes exactly those.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from ..config import TimingConfig
from ..job import CHECKED_CALLS, call_seed
from ..launcher import SideRun
from ..paired import Block, DrivenFailure, PairedTimer, SideBlocks, answered_twice
from ..report import FailureClass, make_failure
from .buffers import OutputError, RankBuffers, WrittenCall
from .inputs import InputMaker
from .quiet import DeviceQuiet

# Input and output buffers of one rank and side stay within this (calls per block are cut to
# fit): host memory on CPU; on a GPU, memory of the rank's GPU (both sides': 16 GiB of an H100's 80).
BUFFER_BUDGET_BYTES = 1 << 30
GPU_BUFFER_BUDGET_BYTES = 8 << 30


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


def pass_probability_bound(checked: int, honest_fraction: float) -> float:
    return honest_fraction ** checked


class Judge:
    """Owns the buffers of both sides and speaks to their ranks only through commands."""

    def __init__(self, maker: InputMaker, may_overwrite: tuple[str, ...], outputs_dir: Path,
                 buffers: dict[str, list[RankBuffers]], step_s: float,
                 on_progress: Optional[Callable[[str, dict[str, Any]], None]] = None,
                 quiet: Optional[DeviceQuiet] = None) -> None:
        self.on_progress = on_progress  # the judge says how far it got: ranks' words are not read
        self.maker = maker
        self.may_overwrite = may_overwrite
        self.outputs_dir = outputs_dir  # the candidate's outputs, as the judge copied them
        self.buffers = buffers
        self.step_s = step_s
        self.checked = CheckedCalls(CHECKED_CALLS)
        self.block_id = 0
        self.quiet = quiet  # GPUs: the clock stops only once the side left no work on them

    # -- one command ----------------------------------------------------------------------
    def write(self, side: str, seeds: list[int]) -> list[list[WrittenCall]]:
        """Each rank's inputs for calls with these seeds, into its buffer (the side is frozen)."""
        return [[rank_buffers.write_inputs(i, self.maker.make(rank, seed)) for i, seed in enumerate(seeds)]
                for rank, rank_buffers in enumerate(self.buffers[side])]

    def run_calls(self, run: SideRun, other: Optional[SideRun], side: str, written: list[list[WrittenCall]],
                  within_s: float, what: str, builds: bool = False) -> float:
        """Thaw the side, have it run the calls, wait for its answer, freeze it: our seconds."""
        self.block_id += 1
        commands = [{"cmd": "calls", "block": self.block_id,
                     "calls": [{"inputs": w.manifest, "slot": self.buffers[side][rank].slot(i),
                                "capacity": self.buffers[side][rank].slot_bytes} for i, w in enumerate(calls)]}
                    for rank, calls in enumerate(written)]
        started = time.perf_counter()
        run.thaw()
        run.command_each(commands, within_s=within_s, what=what, builds=builds)
        while not run.waiting():
            failure = run.poll(0.02)
            if failure is not None:
                raise DrivenFailure(side, failure)
            if other is not None and (failure := other.poll(0)) is not None:
                raise DrivenFailure("reference" if side == "candidate" else "candidate", failure)
        if not run.freeze():
            raise DrivenFailure(side, make_failure(
                FailureClass.PROTOCOL_VIOLATION,
                f"the {side}'s processes could not all be stopped after its calls (a process that cannot "
                "be stopped keeps running while the other side is timed)"))
        if self.quiet is not None and (busy := self.quiet.wait(within_s)) is not None:
            raise DrivenFailure(side, make_failure(
                FailureClass.PROTOCOL_VIOLATION,
                f"the {side} left work running on GPU {busy} for {within_s:.0f} s after it answered "
                f"{what} and its processes were stopped (no side may run while the other is timed)"))
        seconds = time.perf_counter() - started
        if (twice := answered_twice(run)) is not None:
            raise DrivenFailure(side, twice)
        return seconds

    # -- what the judge reads back ------------------------------------------------------------
    def check_inputs(self, written: list[list[WrittenCall]], what: list[str]) -> None:
        for rank, calls in enumerate(written):
            for i, call in enumerate(calls):
                changed = self.buffers["candidate"][rank].changed_inputs(call, self.may_overwrite)
                if changed:
                    raise DrivenFailure("candidate", make_failure(
                        FailureClass.INPUT_MUTATION,
                        f"rank {rank}: input `{changed[0]}` was modified in {what[i]}; only "
                        f"{list(self.may_overwrite) or 'no inputs'} may be overwritten", rank=rank))

    def save_outputs(self, call: int, label: str, what: str) -> None:
        for rank, rank_buffers in enumerate(self.buffers["candidate"]):
            try:
                outputs = rank_buffers.read_outputs(call)
            except OutputError as exc:
                raise DrivenFailure("candidate", make_failure(
                    FailureClass.PROTOCOL_VIOLATION, f"rank {rank}, {what}: {exc}", rank=rank)) from None
            torch.save([t.cpu() for t in outputs], self.outputs_dir / f"task0_{label}_rank{rank}.pt")

    def drop_outputs(self, label: str) -> None:
        for path in self.outputs_dir.glob(f"task0_{label}_rank*.pt"):
            path.unlink()

    # -- the phases ---------------------------------------------------------------------------
    def trials(self, run: SideRun, seeds: list[int]) -> None:
        """The candidate's correctness trials, one command each; every output is kept."""
        for index, seed in enumerate(seeds):
            written = self.write("candidate", [seed])
            self.run_calls(run, None, "candidate", written, within_s=self.step_s, what=f"trial {index}",
                           builds=True)
            self.check_inputs(written, [f"trial {index}"])
            self.save_outputs(0, f"trial{index}", f"trial {index}")
            self.progress("candidate", "step", f"trial {index}")

    def progress(self, side: str, event: str, step: str) -> None:
        if self.on_progress is not None:
            self.on_progress(side, {"event": event, "step": step, "task": 0})

    def after_timed_block(self, written: list[list[WrittenCall]], first_call: int, counted: bool) -> None:
        calls = len(written[0])
        self.check_inputs(written, [f"timed call {first_call + i}" for i in range(calls)])
        if not counted:
            return
        for i in range(calls):
            keep, dropped = self.checked.offer(first_call + i)
            if dropped is not None:
                self.drop_outputs(f"timed{dropped}")
            if keep:
                self.save_outputs(i, f"timed{first_call + i}", f"timed call {first_call + i}")


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
        written = self.judge.write(name, [call_seed(self.timing_seed, first + i) for i in range(calls)])
        expected_s = calls * side.per_call_ms / 1e3
        other = self.ref.run if side is self.cand else self.cand.run
        seconds = self.judge.run_calls(side.run, other, name, written, within_s=self.step_s + 20 * expected_s,
                                       what=f"timed block {self.judge.block_id + 1}")
        if side is self.cand:
            self.judge.after_timed_block(written, first, self.counting)
        side.calls += calls
        side.copies = self.max_calls
        ranks = len(side.run.ranks)
        per_call = seconds * 1e3 / calls
        return Block(calls, [[per_call] * calls for _ in range(ranks)], [[] for _ in range(ranks)], seconds * 1e3)


def calls_per_block(cfg: Optional[TimingConfig], call_bytes: int, slot_bytes: int, device: str = "cpu") -> int:
    """The most calls one command may carry: the block size the timing wants, within the budget."""
    wanted = cfg.max_block_calls if cfg is not None else 1
    budget = BUFFER_BUDGET_BYTES if device == "cpu" else GPU_BUFFER_BUDGET_BYTES
    return max(1, min(wanted, budget // max(call_bytes + slot_bytes, 1)))
