"""``evaluate(config) -> Report``: one whole evaluation of a candidate against a problem.

Order: static checks in the parent (the file parses; it is never imported here), then both
sides' ranks at once: the candidate runs its correctness trials while the reference sets up;
both are timed in alternating rounds that this process drives (paired.py); the candidate saves
the outputs of the timed calls we choose and exits; only then does the reference compute its
trials and re-compute those calls, so that reference outputs never exist while candidate code
runs. Then the comparison and the scores. Without timing the sides run one after the other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import hashlib
import os
import re
import secrets
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import torch

import problems
from problems.spec import _derive_seed, dtype_name

from . import __version__
from .compare import compare_outputs, describe
from .config import EvalConfig, Limits, ResourceLimits
from .digest import outputs_digest
from .exact import exact_path, load_exact, room_for_exact
from .job import CHECKED_CALLS, CHECKED_COPIES, RankJob, TaskSpec, TrialSpec, call_seed
from .launcher import ProgressHook, SideResult, SideRun, box_dir, run_side
from . import scoring
from .outputs import hashes_if_unconfined, load_candidate_outputs, tampering
from .paired import (DrivenFailure, PairedTimer, PairedTiming, answered_twice, finite_number, wait_finished,
                     wait_started)
from .report import (SCHEMA_VERSION, Failure, FailureClass, RankCheck, Report,
                     Timing, Trial, WallTime, bounded_failure, make_failure)
from .roofline import roofline
from .sandbox import unavailable_reason
from .hardware import clocks, gpu_memory
from .hardware.affinity import rank_cpus
from .judge.beside import FrozenBeside
from .judge.buffers import RankBuffers, heap_bytes, output_bound
from .judge.driver import (FROZEN_RUN_NS, Judge, JudgedTimer, calls_per_block, check_host_pools,
                           check_stood_still, hold_budget, pass_probability_bound, phase_summary)
from .judge.inputs import InputMaker, output_capacity, secret_seed
from .judge.quiet import DeviceQuiet
from .phase_clock import PhaseClock
from .static_checks import read_solution, resolve_dtype, static_failure

# Outputs judged at once in the parent (each holds a few copies of one output in memory).
JUDGE_THREADS = 4


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


@contextlib.contextmanager
def _workdir(config: EvalConfig) -> Iterator[Path]:
    if config.workdir is not None:
        config.workdir.mkdir(parents=True, exist_ok=True)
        yield config.workdir
        return
    # /dev/shm keeps output files in memory on GPU hosts, where they can be large.
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="pkb-eval-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def hardware_profile(device: str, world_size: int, profile_id: Optional[str] = None) -> Optional[dict[str, Any]]:
    """The named profile, else the committed one closest to this device and world size."""
    from .hardware import profiles

    if profile_id:
        return profiles.get_profile(profile_id)
    model = torch.cuda.get_device_name(0) if device == "cuda" and torch.cuda.is_available() else None
    return profiles.default_profile(device, world_size, gpu_model=model)


class Evaluation:
    def __init__(self, config: EvalConfig, on_progress: Optional[ProgressHook] = None) -> None:
        self.config = config
        self.on_progress = on_progress
        self.problem = problems.get(config.problem)
        self.dtype = resolve_dtype(self.problem, config.dtype)
        self.problem.check_setting(config.world_size, config.size, self.dtype)
        if config.trials < 1:
            raise ValueError(f"--trials must be at least 1 (5 is the default), not {config.trials}")
        if config.share_gpu and config.device != "cuda":
            raise ValueError("--share-gpu puts every rank on one GPU: it needs --device cuda")
        if torch.cuda.device_count() < config.gpus_needed:
            raise ValueError(f"world size {config.world_size} needs {config.gpus_needed} GPUs; "
                             f"this host has {torch.cuda.device_count()} (--share-gpu tests the GPU path "
                             "on one, with times that measure nothing)")
        if config.sandbox and (reason := unavailable_reason()) is not None:
            raise ValueError(f"this host cannot confine candidate code ({reason}); see docs/sandbox.md, "
                             "or pass --no-sandbox (EvalConfig(sandbox=False)) to run it unconfined")
        self.source = read_solution(config.solution_path)
        base = config.seed if config.seed is not None else secrets.randbelow(2**31)
        self.seeds = [_derive_seed(base, "trial", i) % 2**31 for i in range(config.trials)]
        self.timing_seed = _derive_seed(base, "timing") % 2**31
        # One secret per rank, the same for both sides' rank r: the seeds in the job (which every
        # rank reads) do not rebuild another rank's inputs without it.
        self.salts = [secrets.token_hex(8) for _ in range(config.world_size)]
        # Judged, every input is drawn from a seed mixed with this (problems/spec.py secret_seed):
        # the public seeds a rank's job holds rebuild none of them, shared streams included.
        self.seed_secret = secrets.token_hex(16) if self.judged else ""
        # Judged in the ranks (GPUs by default), the ranks make their inputs: every rank of both
        # sides mixes this, which comes on its stdin, into every seed (predicts_shared_inputs
        # rebuilt a problem's shared inputs from the job's seeds). It is in the ranks' memory,
        # where a candidate can look for it: the judge outside is what keeps it out of reach.
        self.rank_seed_secret = "" if self.judged else secrets.token_hex(16)
        self.timing = config.resolved_timing() if config.timing else None
        self.profile = (hardware_profile(config.device, config.world_size, config.hardware_profile)
                        if config.timing else None)
        self.pinning = rank_cpus(config.world_size) if config.device == "cuda" and self.timing else None
        self.maker = InputMaker(self.problem, config.world_size, config.size, self.dtype, tuple(self.salts),
                                devices=tuple(config.rank_device(r) for r in range(config.world_size)),
                                secret=self.seed_secret)
        self.started_at = _now()
        self.started_clock = time.monotonic()
        self.phases = PhaseClock()  # where the wall time went, by phase (report wall_time.phases_s)

    def rechecks(self, timed_calls: Sequence[int]) -> list[TrialSpec]:
        """The candidate's checked timed calls, as trials the reference runs after the seeded ones."""
        return [{"index": len(self.seeds) + i, "seed": secret_seed(call_seed(self.timing_seed, n), self.seed_secret),
                 "label": f"recheck of timed call {n}"} for i, n in enumerate(timed_calls)]

    def job(self, side: str, workdir: Path) -> RankJob:
        out_dir = workdir / side  # where the side's outputs land once all of its processes are gone
        out_dir.mkdir(exist_ok=True)
        cpus = os.cpu_count() or 1
        # The reference recomputes the judge's inputs, so it gets the seeds they were drawn from;
        # a judged candidate's inputs are the judge's to make, and its job keeps the public seeds.
        secret = self.seed_secret if side == "reference" else ""
        trials: list[TrialSpec] = [{"index": i, "seed": secret_seed(s, secret)} for i, s in enumerate(self.seeds)]
        task: TaskSpec = {
            "task": 0, "problem": self.problem.slug, "size": self.config.size,
            "dtype": dtype_name(self.dtype),
            "trials": trials,
            "timing": self.timing.__dict__ if self.timing else None,
            "timing_seed": self.timing_seed,
        }
        return {
            "side": side, "world_size": self.config.world_size, "device": self.config.device,
            "backend": self.config.backend,
            "solution_path": str(self.config.solution_path.resolve()) if side == "candidate" else None,
            "out_dir": str(out_dir), "tasks": [task],
            "threads": max(1, cpus // self.config.world_size),
            "collective_timeout_s": self.config.limits.total_s,
            "driven": self.timing is not None,
            "affinity": self.pinning or {},
        }

    def resources(self, side: str) -> ResourceLimits:
        """Memory per rank that fits the host with both sides alive; a disk that holds every
        output file the judge asks the side for (the reference's: its exact answers too)."""
        fitted = dataclasses.replace(
            self.config.resources,
            memory_bytes_per_rank=fit_to_host(self.config.resources.memory_bytes_per_rank, self.config.world_size),
            disk_bytes=disk_for_outputs(self.config.resources.disk_bytes, self.output_files_per_rank(side),
                                        self.output_bytes_bound(), self.config.world_size))
        if side != "reference":
            return fitted
        return room_for_exact(fitted, banded=self.problem.decision_band is not None)

    def output_files_per_rank(self, side: str) -> int:
        """As launcher.output_rules counts them: every trial, and the checked timed calls (the
        judge outside the ranks has the reference recompute its drawn calls as trials)."""
        if not self.config.timing:
            return self.config.trials
        return self.config.trials + (CHECKED_CALLS if self.judged and side == "reference" else CHECKED_COPIES)

    @functools.cached_property
    def call_bytes(self) -> list[int]:
        """Each rank's inputs of one call in the judge's buffers, from shapes alone."""
        return [self.maker.call_bytes(rank) for rank in range(self.config.world_size)]

    @functools.cached_property
    def slot_bytes(self) -> int:
        """The judge's output slot: sized from the problem alone (judge/inputs.py)."""
        return output_capacity(self.problem, self.config.world_size, self.config.size, self.dtype,
                               max(self.call_bytes))

    def output_bytes_bound(self) -> int:
        """The most bytes one rank's outputs of one call may take (judge/buffers.py output_bound)."""
        return output_bound(self.slot_bytes)

    def side_run(self, side: str, workdir: Path, buffers: Optional[list[RankBuffers]] = None) -> SideRun:
        """A judged candidate (``buffers``) gets no salt: its inputs are the judge's to make."""
        job = self.job(side, workdir)
        if buffers is not None:
            job["driven"] = True
        salts = None if buffers is not None and side == "candidate" else self.salts
        return SideRun(job, workdir, self.side_limits(side), self.timing_limit(),
                       self.on_progress, sandbox=self.config.sandbox, resources=self.resources(side),
                       salts=salts, buffers=buffers, seed_secret=self.rank_seed_secret)

    def run_side(self, side: str, workdir: Path) -> SideResult:
        return run_side(self.job(side, workdir), workdir, self.side_limits(side), self.timing_limit(),
                        self.on_progress, sandbox=self.config.sandbox, resources=self.resources(side),
                        salts=self.salts, seed_secret=self.rank_seed_secret)

    def side_limits(self, side: str) -> Limits:
        """The configured limits, the side's total cut to fit the deadline. Sides that run one
        after the other: the candidate gets at most half of what is left, the reference the rest;
        sides that run together (timed evaluations) both get what is left. Less a few seconds
        to judge."""
        limits = self.config.limits
        if self.config.deadline_s is None:
            return limits
        left = self.config.deadline_s - (time.monotonic() - self.started_clock)
        share = left / 2 if side == "candidate" and self.timing is None else left - 5.0
        return dataclasses.replace(limits, total_s=max(1.0, min(limits.total_s, share)))

    def timing_limit(self) -> float:
        """Seconds the timed phase may take: its own caps, generously, plus input copies."""
        if not self.timing:
            return 0.0
        return (self.timing.max_time_s + self.timing.warmup_time_s) * 3 + 30

    @property
    def judged(self) -> bool:
        """Whether the judge outside the ranks makes the inputs, holds the clock and copies the
        outputs (docs/judge.md): on CPU unless told otherwise (``cpu_judge="ranks"``, how the
        suite covers the GPUs' default), on GPUs when asked (``gpu_judge="outside"``)."""
        if self.config.device == "cpu":
            return self.config.cpu_judge == "outside"
        return self.config.gpu_judge == "outside"

    def buffer_device(self, rank: int) -> str:
        return self.config.rank_device(rank)

    def run(self) -> Report:
        static = static_failure(self.source)
        if static is not None:
            return self.report(static, [], None, None, None)
        with _workdir(self.config) as workdir:
            if self.judged:
                return self.run_judged(workdir)
            if self.timing is not None:
                return self.run_timed(workdir)
            candidate = self.run_side("candidate", workdir)
            if not candidate.ok:
                return self.report(candidate.failure, [], None, candidate, None)
            hashes = hashes_if_unconfined(candidate, workdir)
            # Judged in the ranks too, an unconfined candidate could plant links where the
            # reference writes its exact answers (red team, plants_reference_links: passed here
            # until the ninth pass).
            if (planted := planted_in_reference_folders(workdir)) is not None:
                return self.report(planted, [], None, candidate, None)
            reference = self.run_side("reference", workdir)
            if not reference.ok:
                return self.report(reference.failure, [], None, candidate, reference)
            if (tampered := tampering(hashes, workdir)) is not None:
                return self.report(tampered, [], None, candidate, reference)
            trials, failure = self.judge(workdir)
            return self.report(failure, trials, None, candidate, reference)

    def run_judged(self, workdir: Path) -> Report:
        """The candidate never makes an input, holds a clock or writes a file the judge reads:
        the judge feeds it through shared buffers and copies what it returns (judge/driver.py)."""
        call_bytes, slot = self.call_bytes, self.slot_bytes
        shape = calls_per_block(self.timing, max(call_bytes), slot, self.config.device, self.config.judge_release)
        sides = ["candidate", "reference"] if self.timing is not None else ["candidate"]
        heap = self.heap_bytes(shape.calls)
        buffers = {side: [RankBuffers(f"{side}{rank}", shape.ring, call_bytes[rank], slot, self.buffer_device(rank),
                                      heap_bytes=heap)
                          for rank in range(self.config.world_size)] for side in sides}
        try:
            return self._run_judged(workdir, buffers, shape.calls)
        finally:
            for side_buffers in buffers.values():
                for rank_buffers in side_buffers:
                    rank_buffers.close()

    def heap_bytes(self, calls: int) -> int:
        """Each rank's output heap: on GPUs released by block, where outputs are read in place
        after the block instead of copied into slots on the clock (shim/heap.py); else none.
        (The CPU has no allocator to route a call's allocations into shared memory.)"""
        if self.config.device != "cuda" or self.config.judge_release != "block":
            return 0
        traffic = self.problem.traffic(self.problem.setting(self.config.world_size, self.config.size, self.dtype))
        return heap_bytes(calls, traffic.hbm_bytes)

    def _run_judged(self, workdir: Path, buffers: dict[str, list[RankBuffers]], calls: int) -> Report:
        outputs_dir = workdir / "candidate"
        outputs_dir.mkdir(exist_ok=True)
        step_s = self.config.limits.step_s
        gpus = sorted({self.config.rank_gpu(r) for r in range(self.config.world_size)})
        quiet = DeviceQuiet(gpus) if self.config.device == "cuda" else None
        # What the judge may keep of the candidate's outputs (its copies live in host memory, outside
        # the candidate's limits): every trial's and drawn call's, each within the honest bound.
        keep_budget = disk_for_outputs(self.config.resources.disk_bytes, self.config.trials + CHECKED_CALLS,
                                       self.output_bytes_bound(), self.config.world_size)
        self.phases = PhaseClock()
        judge = Judge(self.maker, self.problem.may_overwrite, outputs_dir, buffers, step_s,
                      on_progress=self.on_progress, quiet=quiet, keep_budget=keep_budget,
                      hold_budget=hold_budget(self.config.device, self.config.world_size),
                      release=self.config.judge_release)
        candidate_run = self.side_run("candidate", workdir, buffers=buffers["candidate"])
        reference_run = self.side_run("reference", workdir, buffers=buffers["reference"]) if self.timing else None
        if candidate_run.begin() is not None:
            return self.report(candidate_run.failure, [], None, candidate_run.end(),
                               reference_run.end() if reference_run else None)
        # Unconfined, the candidate's processes run with our rights on the disk the judge writes its
        # copies to: each file is held to the digest of what the judge wrote (red team,
        # rewrites_judge_files). Confined, that disk is in none of the side's namespaces.
        judge.guard_files = not getattr(candidate_run.box, "confined", False)
        started = {"candidate": candidate_run}
        paired = None
        try:
            # One side at a time, the start-up too: the reference's sandbox and ranks start only
            # once the candidate stands frozen. Started beside a candidate whose processes took
            # the host's processors, the reference ran out of its own start-up allowance (or its
            # sandbox's set-up time) and the candidate's evaluation ended as our harness_error
            # (red team, starves_the_reference_start).
            for name, run in (("candidate", candidate_run), ("reference", reference_run)):
                if run is None:
                    continue
                if run is reference_run:
                    if (planted := planted_in_reference_folders(workdir)) is not None:
                        raise DrivenFailure("candidate", planted)
                    # Its share of the evaluation's deadline is what is left now, as it begins,
                    # not what was left at the candidate's launch: its clock starts here.
                    run.limits = self.side_limits(name)
                    self.start_beside_frozen(run, candidate_run, started)
                else:
                    wait_started(name, started)
                if not run.freeze():
                    raise DrivenFailure(name, make_failure(
                        FailureClass.PROTOCOL_VIOLATION,
                        f"the {name}'s processes could not all be stopped after its start"))
            self.phases.mark("start")
            judge.trials(candidate_run, self.seeds)
            self.phases.mark("trials")
            if reference_run is not None:
                assert self.timing is not None
                paired = JudgedTimer(judge, candidate_run, reference_run, self.timing, step_s=step_s,
                                     timing_seed=self.timing_seed, max_calls=calls).run()
            self.phases.mark("timing")
        except DrivenFailure as exc:
            ran = (candidate_run.run_seconds(), reference_run.run_seconds() if reference_run else 0.0)
            starved = self.starved_reference(candidate_run) if exc.side == "reference" else None
            candidate = candidate_run.end()
            reference = reference_run.end() if reference_run else None
            if exc.side == "candidate":
                return self.report(exc.failure, [], None, candidate, None)
            if starved is not None:
                return self.report(starved, [], None, candidate, reference)
            if reference_run is not None and (spent := self.candidate_spent_the_time(reference_run, *ran)) is not None:
                return self.report(spent, [], None, candidate, reference)
            failure = dict(exc.failure, failure_class=FailureClass.HARNESS_ERROR.value)
            return self.report(failure, [], None, candidate, reference)  # type: ignore[arg-type]
        candidate_run.thaw()
        candidate_run.command({"cmd": "finish"}, step_s)
        wait_finished(candidate_run)
        candidate = candidate_run.end()
        self.phases.mark("candidate_end")
        if candidate.ok and (twice := answered_twice(candidate_run)) is not None:
            candidate.failure = twice  # the last block's second answer, after the judge stopped waiting
        if not candidate.ok:
            return self.report(candidate.failure, [], None, candidate, reference_run.end() if reference_run else None)
        timed_calls = sorted(judge.checked.kept)
        checked: Optional[dict[tuple[str, int], Any]] = None  # re-checked in the slots: each (label, rank)'s checks
        if reference_run is None:
            if (planted := planted_in_reference_folders(workdir)) is not None:
                return self.report(planted, [], None, candidate, None)
            reference = self.run_side("reference", workdir)
        else:
            box = reference_run.box
            if not getattr(box, "confined", True) and \
                    (planted := planted_in_reference_folders(workdir, box.work / "out")) is not None:
                return self.report(planted, [], None, candidate, reference_run.end())
            finishing = time.monotonic()
            span = judge.recheck_span()
            try:
                checked = self.recheck_in_slots(judge, reference_run, workdir, timed_calls, span) if span else None
            except DrivenFailure as exc:
                reference = reference_run.end()
                if (spent := self.left_too_little(reference_run, candidate, finishing)) is not None:
                    return self.report(spent, [], None, candidate, reference)
                failure = dict(exc.failure, failure_class=FailureClass.HARNESS_ERROR.value)
                return self.report(failure, [], None, candidate, reference)  # type: ignore[arg-type]
            reference_run.thaw()
            if checked is not None:
                reference_run.command({"cmd": "finish", "rechecked": True}, step_s)
            else:  # a ring too short for one re-check's slots: the reference writes files
                rechecks = self.rechecks(timed_calls)
                reference_run.command({"cmd": "finish", "rechecks": rechecks},
                                      step_s * (len(self.seeds) + len(rechecks) + 1))
            wait_finished(reference_run)
            self.phases.mark("finish")
            reference = reference_run.end()
            if not reference.ok and (spent := self.left_too_little(reference_run, candidate, finishing)) is not None:
                return self.report(spent, [], None, candidate, reference)
        if not reference.ok:
            return self.report(reference.failure, [], None, candidate, reference)
        self.phases.mark("reference_end")
        if checked is not None:
            trials, failure = self.verdicts(self.labels(timed_calls), checked)
        else:
            trials, failure = self.judge(workdir, timed_calls, written=judge.written, held=judge.held)
        self.phases.mark("comparison")
        timing = None
        if failure is None and paired is not None:
            timing, failure = self.score(paired, None)
            counted = sum(block.calls for block in paired.candidate.counted)
            timing["checks"] = {"timed_calls": counted, "checked": len(timed_calls), "judge": "outside",
                                "release": self.config.judge_release,
                                "pass_bound": {str(f): pass_probability_bound(len(timed_calls), f)
                                               for f in (0.5, 0.9, 0.99)},
                                "calls_per_block_max": calls,
                                "block_ms": {side: phase_summary(phases) for side, phases in judge.phases.items()
                                             if phases},
                                **({"gpu_quiet": quiet.describe()} if quiet is not None else {}),
                                **({"outputs_read": outputs_read(buffers)}
                                   if buffers["candidate"][0].heap is not None else {})}
        return self.report(failure, trials, timing, candidate, reference)

    def recheck_in_slots(self, judge: Judge, reference_run: SideRun, workdir: Path, timed_calls: Sequence[int],
                         span: int) -> dict[tuple[str, int], Any]:
        """The reference recomputes every trial and checked timed call on the judge's inputs, a
        block at a time, into its slots; each is judged against the judge's copy of the candidate's
        outputs as it comes, on the device where both lie, before the next block overwrites it. On a
        GPU host the files this replaces took most of an evaluation's wall time (docs/judge.md,
        "Where a pkb eval's wall time goes")."""
        labels = self.labels(timed_calls)
        checked: dict[tuple[str, int], Any] = {}
        step_s = self.config.limits.step_s
        seeds = [seed for _, seed, _, _, _ in labels]
        # A call's ranks judged at once: each check is a few memory-bound passes that release the GIL.
        with ThreadPoolExecutor(max_workers=JUDGE_THREADS) as pool:
            for index, per_rank in judge.recheck(reference_run, seeds, step_s, span):
                _, _, kind, label, _ = labels[index]
                results = pool.map(lambda ranked: self.check_rank(
                    workdir, label, "", ranked[0], written=judge.written,
                    held=held_copy(judge.held, label, ranked[0]), reference=ranked[1]), enumerate(per_rank))
                checked.update(((label, rank), result) for rank, result in enumerate(results))
                # The steps the reference's ranks said when they wrote files, now the judge's to say.
                judge.progress("reference", "step", f"trial {index}" if kind == "correctness"
                               else f"recheck of timed call {label.removeprefix('timed')}")
        return checked

    def candidate_spent_the_time(self, reference: SideRun, candidate_ran_s: float,
                                 reference_ran_s: float) -> Optional[Failure]:
        """The candidate's resource_limit when the evaluation's time ran out while the judge ran
        the reference, but most of it went to the candidate (red team, spends_the_deadline_at_start:
        a start-up held to just short of its share made the deadline fall in the reference's
        blocks); None otherwise."""
        if not reference.out_of_time or candidate_ran_s <= reference_ran_s:
            return None
        return make_failure(
            FailureClass.RESOURCE_LIMIT,
            f"the candidate's side ran for {candidate_ran_s:.0f} s of the "
            f"{self.config.deadline_s or self.config.limits.total_s:.0f} s an evaluation may take, the "
            f"reference's {reference_ran_s:.0f} s: too little was left to time and check it")

    @staticmethod
    def left_too_little(reference: SideRun, candidate: SideResult, finishing: float) -> Optional[Failure]:
        """The candidate's resource_limit when the reference ran out of the evaluation's time while
        it recomputed the answers (since ``finishing``), after a candidate side that took longer
        than that recomputation: the time went to the candidate (red team, blames_the_reference: a
        finish held to the last second and a slow teardown turned a value mismatch into our
        harness_error, under either judge); None otherwise."""
        if not reference.out_of_time or candidate.wall_s <= time.monotonic() - finishing:
            return None
        return make_failure(
            FailureClass.RESOURCE_LIMIT,
            f"the candidate's side took {candidate.wall_s:.0f} s of the {reference.limits.total_s:.0f} s "
            "an evaluation may take (the end of its processes included), and left the reference too "
            "little to recompute the answers it is judged by")

    def starved_reference(self, candidate: SideRun) -> Optional[Failure]:
        """On GPUs, a reference that failed while the candidate's processes held more than their
        share of a GPU's memory: the candidate's ``resource_limit``, not our harness_error (asked
        before the candidate's processes end; hardware/gpu_memory.py)."""
        if self.config.device != "cuda" or candidate.box is None:
            return None
        try:
            why = gpu_memory.starved_by(candidate.box.process_ids())
        except Exception:  # noqa: BLE001 - a driver query must not turn a verdict into no verdict
            return None
        return make_failure(FailureClass.RESOURCE_LIMIT, why) if why else None

    @staticmethod
    def start_beside_frozen(reference: SideRun, candidate: SideRun, started: dict[str, SideRun]) -> None:
        """Start the reference while the candidate stands frozen. A frozen candidate's process can
        still continue itself (a SIGCONT it had a timer send) and starve the reference's start:
        the candidate's threads must not have run meanwhile, whether or not the reference came
        up (red team, wakes_itself_while_frozen)."""
        check_host_pools(candidate, "before the reference's start-up")
        before = candidate.thread_run_ns()
        try:
            if reference.begin() is not None:
                raise DrivenFailure("reference", reference.failure)  # type: ignore[arg-type]
            started["reference"] = reference
            wait_started("reference", started)
        finally:
            check_stood_still(before, candidate.thread_run_ns(), FROZEN_RUN_NS,
                              "while they stood stopped, during the reference's start-up",
                              "work that escapes the freeze runs beside the other side")

    def run_timed(self, workdir: Path) -> Report:
        assert self.timing is not None
        candidate_run, reference_run = self.side_run("candidate", workdir), self.side_run("reference", workdir)
        self.phases = PhaseClock()
        if candidate_run.begin() is not None:
            return self.report(candidate_run.failure, [], None, candidate_run.end(), reference_run.end())
        gpus = clocks.visible_gpus(self.config.gpus_needed)
        # One side at a time, as the judge outside the ranks runs them: the candidate stands frozen
        # while the reference starts and while each of its blocks runs (judge/beside.py). Both
        # sides alive at once, helpers of a wrong candidate starved the reference past its
        # sandbox's set-up time and its blocks' deadlines: our harness_error (red team, ninth pass).
        beside = FrozenBeside(candidate_run)
        timer = PairedTimer(candidate_run, reference_run, self.timing, step_s=self.config.limits.step_s,
                            snapshot=(lambda: clocks.snapshot(gpus)) if gpus else None,
                            clock="ranks" if self.config.device == "cuda" else "parent", beside=beside)
        started = {"candidate": candidate_run}
        try:
            wait_started("candidate", started)
            # Its share of the evaluation's deadline is what is left as it begins.
            reference_run.limits = self.side_limits("reference")
            if (planted := planted_in_reference_folders(workdir)) is not None:
                raise DrivenFailure("candidate", planted)  # as in _run_judged (plants_reference_links)
            beside.freeze("start-up")
            self.start_beside_frozen(reference_run, candidate_run, started)
            beside.thaw("start-up")
            self.phases.mark("start")
            paired = timer.run()  # the trials come first in each side's ranks
            self.phases.mark("timing")
        except DrivenFailure as exc:
            ran = (candidate_run.run_seconds(), reference_run.run_seconds())
            starved = self.starved_reference(candidate_run) if exc.side == "reference" else None
            candidate, reference = candidate_run.end(), reference_run.end()
            if exc.side == "candidate":
                return self.report(exc.failure, [], None, candidate, None)
            if starved is not None:
                return self.report(starved, [], None, candidate, reference)
            if (spent := self.candidate_spent_the_time(reference_run, *ran)) is not None:
                return self.report(spent, [], None, candidate, reference)
            # The reference runs only our code: whatever went wrong there is ours.
            failure = dict(exc.failure, failure_class=FailureClass.HARNESS_ERROR.value)
            return self.report(failure, [], None, candidate, reference)  # type: ignore[arg-type]
        slots = timer.secret_slots(CHECKED_COPIES)
        candidate_run.command({"cmd": "finish", "keep": slots}, None)
        wait_finished(candidate_run)
        candidate = candidate_run.end()
        self.phases.mark("candidate_end")
        if candidate.ok and (twice := answered_twice(candidate_run)) is not None:
            candidate.failure = twice  # the last block's second answer, sent at the finish
        if not candidate.ok:
            return self.report(candidate.failure, [], None, candidate, reference_run.end())
        hashes = hashes_if_unconfined(candidate, workdir)
        timed_calls = timer.kept_calls(slots)
        missing = self.missing_timed_outputs(timed_calls, workdir / "candidate")
        if missing is not None:
            return self.report(missing, [], None, candidate, reference_run.end())
        # The candidate's processes are gone: now the reference may compute what it is judged by,
        # in folders that hold nothing the candidate left there (unconfined: plants_reference_links).
        box = reference_run.box
        if not getattr(box, "confined", True) and \
                (planted := planted_in_reference_folders(workdir, box.work / "out")) is not None:
            return self.report(planted, [], None, candidate, reference_run.end())
        finishing = time.monotonic()
        reference_run.command({"cmd": "finish", "rechecks": self.rechecks(timed_calls)}, None)
        wait_finished(reference_run)
        self.phases.mark("finish")
        reference = reference_run.end()
        self.phases.mark("reference_end")
        if not reference.ok and (spent := self.left_too_little(reference_run, candidate, finishing)) is not None:
            return self.report(spent, [], None, candidate, reference)
        if not reference.ok:
            return self.report(reference.failure, [], None, candidate, reference)
        if (tampered := tampering(hashes, workdir)) is not None:
            return self.report(tampered, [], None, candidate, reference)
        trials, failure = self.judge(workdir, timed_calls, returned=timer.cand.digests_of)
        self.phases.mark("comparison")
        timing = None
        if failure is None:
            timing, failure = self.score(paired, clocks.compare(*timer.snapshots) if gpus else None)
        return self.report(failure, trials, timing, candidate, reference)

    def missing_timed_outputs(self, expected: list[int], outputs: Path) -> Optional[Failure]:
        """Each rank must have saved exactly the timed calls we asked for."""
        for rank in range(self.config.world_size):
            found = sorted(int(m.group(1)) for p in outputs.glob(f"task0_timed*_rank{rank}.pt")
                           if (m := re.fullmatch(rf"task0_timed(\d+)_rank{rank}\.pt", p.name)))
            if found != expected or not expected:
                return make_failure(FailureClass.PROTOCOL_VIOLATION,
                                    f"rank {rank}: the outputs of timed calls {expected} were expected, "
                                    f"found {found[:8]}", rank=rank)
        return None

    def check_rank(self, workdir: Path, label: str, reference_label: str, rank: int,
                   returned: Optional[list[str]] = None,
                   written: Optional[dict[str, str]] = None,
                   held: Optional[list[torch.Tensor]] = None,
                   reference: Optional[tuple[list[torch.Tensor], list[dict[str, Any]]]] = None
                   ) -> Optional[list[Any]] | Failure:
        """One rank's output checks for one trial; None when the candidate's file is unreadable;
        a failure when a timed call's saved outputs are not what it returned (``returned``:
        their digests as the rank sent them right after the call), or when a file the judge
        wrote is no longer what it wrote (``written``: name -> SHA-256, Judge.written).
        ``held``: the judge's own copy of these outputs, still in its memory (Judge.held): judged
        as they are, never written out and read back (a 64 MiB output's round trip through a
        file took 0.28 s of the judge's time on a GPU host, scripts/gpu/recheck_cost.py).
        ``reference``: the reference's outputs and exact records as the judge read them from its
        slots (``Judge.recheck``), instead of its files."""
        if held is not None:
            got: Optional[list[Any]] | Failure = held
        else:
            name = f"task0_{label}_rank{rank}.pt"
            got = load_candidate_outputs(workdir / "candidate" / name, (written or {}).get(name))
        if got is None or isinstance(got, dict):
            return got
        if returned is not None and outputs_digest(got) != returned:
            return make_failure(FailureClass.PROTOCOL_VIOLATION,
                                f"rank {rank}: the saved outputs of {label.replace('timed', 'timed call ')} are not "
                                "what the call returned (they changed between the call and the save)", rank=rank)
        if reference is not None:
            want, exact = reference
        else:
            reference_path = workdir / "reference" / f"task0_{reference_label}_rank{rank}.pt"
            # Mapped, not read: the reference's files are ours, and they move once, to the
            # comparison's device (a 64 MiB output: 46 ms read, 6 ms mapped).
            want = torch.load(reference_path, weights_only=True, mmap=True)
            exact = load_exact(exact_path(reference_path))
        device = self.comparison_device(rank)
        return list(compare_outputs(on_device(got, device), on_device(want, device),
                                    self.problem.tolerance(self.dtype), on_device(exact, device)))

    def comparison_device(self, rank: int) -> torch.device:
        """Where rank ``rank``'s outputs are judged: its own GPU when the parent sees it (the
        comparison is a few memory-bound passes over each output: a 64 MiB output took 3.3 s on
        a 2-core host's processor), else the processor."""
        if self.config.device == "cuda" and torch.cuda.is_available() and self.config.rank_gpu(rank) < torch.cuda.device_count():
            return torch.device("cuda", self.config.rank_gpu(rank))
        return torch.device("cpu")

    def labels(self, timed_calls: Sequence[int]) -> list[tuple[int, int, str, str, str]]:
        """What is judged, in order: (index, seed, kind, label, the reference's file label): the
        seeded trials, then the checked timed calls, recomputed by the reference as trials after them."""
        labels = [(i, s, "correctness", f"trial{i}", f"trial{i}") for i, s in enumerate(self.seeds)]
        return labels + [(len(self.seeds) + i, call_seed(self.timing_seed, n), "timed", f"timed{n}",
                          f"trial{len(self.seeds) + i}") for i, n in enumerate(timed_calls)]

    def judge(self, workdir: Path, timed_calls: Sequence[int] = (),
              returned: Callable[[int], Optional[list[list[str]]]] = lambda call: None,
              written: Optional[dict[str, str]] = None,
              held: Optional[dict[str, list[list[torch.Tensor]]]] = None) -> tuple[list[Trial], Optional[Failure]]:
        """Every trial's and checked timed call's outputs, rank by rank, against the reference's
        files (``held``: label -> per rank, the judge's copies still in its memory; the rest from files)."""
        labels = self.labels(timed_calls)

        def digests(label: str, rank: int) -> Optional[list[str]]:
            if not label.startswith("timed"):
                return None
            per_rank = returned(int(label.removeprefix("timed")))
            return per_rank[rank] if per_rank is not None else None

        items = [(label, reference_label, rank, digests(label, rank)) for _, _, _, label, reference_label in labels
                 for rank in range(self.config.world_size)]
        # Several outputs at once: each check is a few memory-bound passes that release the GIL.
        with ThreadPoolExecutor(max_workers=JUDGE_THREADS) as pool:
            checked = pool.map(
                lambda item: self.check_rank(workdir, *item, written=written,
                                             held=held_copy(held, label=item[0], rank=item[2])),
                items)
            return self.verdicts(labels, dict(zip(((item[0], item[2]) for item in items), checked)))

    def verdicts(self, labels: list[tuple[int, int, str, str, str]],
                 checked: dict[tuple[str, int], Any]) -> tuple[list[Trial], Optional[Failure]]:
        """The trials, and the first failure in their order, from each (label, rank)'s checks."""
        trials: list[Trial] = []
        failure: Optional[Failure] = None
        for index, seed, kind, label, _ in labels:
            ranks: list[RankCheck] = []
            for rank in range(self.config.world_size):
                checks = checked[(label, rank)]
                if isinstance(checks, dict):
                    return trials, dict(checks, trial=index)  # type: ignore[return-value]
                if checks is None:
                    # The harness writes every file before its rank says "done": a missing or
                    # unreadable one means candidate code got in the way.
                    return trials, make_failure(FailureClass.PROTOCOL_VIOLATION,
                                                f"rank {rank}: no readable outputs for {label} although the "
                                                "rank reported success", rank=rank, trial=index)
                ranks.append(RankCheck(rank=rank, passed=all(c["status"] == "ok" for c in checks), outputs=checks))
                bad = next((c for c in checks if c["status"] != "ok"), None)
                if bad is not None and failure is None:
                    what = f"timed call {label.removeprefix('timed')}" if kind == "timed" else f"trial {index}"
                    failure = make_failure(FailureClass(bad["status"]), f"rank {rank}, {what}: {describe(bad)}",
                                           rank=rank, trial=index, output=bad["index"])
            trials.append(Trial(index=index, seed=seed, kind=kind,  # type: ignore[typeddict-item]
                                passed=all(r["passed"] for r in ranks), ranks=ranks))
        return trials, failure

    def score(self, paired: PairedTiming, clock_check: Optional[dict[str, Any]]) -> tuple[Timing, Optional[Failure]]:
        assert self.timing is not None
        traffic = self.problem.traffic(self.problem.setting(self.config.world_size, self.config.size, self.dtype))
        rl = roofline(traffic, self.profile, self.dtype) if self.profile is not None else None
        return scoring.score(paired, device=self.config.device, world_size=self.config.world_size,
                             target_half_width=self.timing.target_half_width, roofline=rl,
                             clocks=clock_check, pinning=self.pinning, align=self.gpu_align(),
                             judge="outside" if self.judged else "ranks", shared_gpu=self.config.share_gpu)

    def gpu_align(self) -> Optional[str]:
        """How the ranks met before each timed call, where the ranks time themselves (GPUs judged
        in the ranks); None where the judge's clock times whole blocks."""
        if self.config.device != "cuda" or self.config.gpu_judge == "outside" or self.timing is None:
            return None
        return self.timing.gpu_align

    def report(self, failure: Optional[Failure], trials: list[Trial], timing: Optional[Timing],
               candidate: Optional[SideResult], reference: Optional[SideResult]) -> Report:
        software = software_of(candidate)
        compile_s = build_seconds(candidate) if candidate is not None else None
        finished = _now()
        return Report(
            schema_version=SCHEMA_VERSION, evaluator_version=__version__,
            problem={"slug": self.problem.slug, "id": self.problem.id, "version": problems.version(self.problem)},
            setting={"world_size": self.config.world_size, "size": self.config.size,
                     "dtype": dtype_name(self.dtype), "device": self.config.device,
                     "backend": self.config.backend,
                     "trials": self.config.trials},
            solution={"sha256": hashlib.sha256(self.source).hexdigest(), "bytes": len(self.source)},
            verdict="pass" if failure is None else "fail",
            # Its text within what the portal can take: a rank's words are candidate code's to forge
            # (report.bounded_failure; red team, reports_an_oversized_failure).
            failure=bounded_failure(failure), trials=trials, timing=timing,
            hardware_profile=self.profile["id"] if self.profile else None,
            sandbox="on" if self.config.sandbox else "off",
            software=software,
            wall_time=WallTime(total_s=time.monotonic() - self.started_clock,
                               reference_s=reference.wall_s if reference else 0.0,
                               candidate_s=candidate.wall_s if candidate else 0.0,
                               compile_s=compile_s,
                               **({"phases_s": self.phases.seconds()} if self.phases.marks else {})),
            started_at=self.started_at, finished_at=finished,
        )


def planted_in_reference_folders(workdir: Path, box_out: Optional[Path] = None) -> Optional[Failure]:
    """The candidate's protocol_violation if the reference's folders are not as the judge left
    them, checked before the reference starts (its box not yet made) and, once the candidate's
    processes are gone, before it writes its answers (``box_out``: the folder an unconfined
    reference box writes them in, still a real and empty one). Its outputs folder, where the
    judge copies them and reads them from, is not made yet or a real, empty folder. Unconfined,
    the candidate runs with our rights on this disk: it made the reference's box at import and put
    links where the reference writes its exact answers; the reference wrote through them, the copy
    out refused links, and with no exact answers the parent judged by the problem's tolerance,
    which a candidate wrong by 0.05 everywhere passed (red team, plants_reference_links).
    Confined, none of these folders is in the candidate's namespaces."""
    def empty(folder: Path, must_exist: bool) -> bool:
        if not os.path.lexists(folder):
            return not must_exist
        return folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir())

    # Every folder on the way from the workdir is a real one, not a link to somewhere else.
    real_path = box_out is None or not any(folder.is_symlink() for folder in (box_out.parent, box_out.parent.parent))
    box_ok = real_path and (empty(box_out, True) if box_out is not None
                            else not os.path.lexists(box_dir(workdir, "reference")))
    if box_ok and empty(workdir / "reference", False):  # made with the reference's job: before the candidate, if timed
        return None
    return make_failure(FailureClass.PROTOCOL_VIOLATION,
                        "the reference's folders held files or links the reference had not made (only a candidate "
                        "process, running unconfined with the evaluator's rights, could have put them there)")


def outputs_read(buffers: dict[str, list[RankBuffers]]) -> dict[str, int]:
    """How the judge read the outputs it took, both sides: in place in the ranks' heaps, or copied
    by the ranks into slots (an output outside the heap, or a candidate that reuses its outputs)."""
    return {way: sum(b.outputs_read[way] for side in buffers.values() for b in side) for way in ("in_place", "copied")}


def held_copy(held: Optional[dict[str, list[list[torch.Tensor]]]], label: str, rank: int) -> Optional[list[torch.Tensor]]:
    """Rank ``rank``'s outputs under ``label`` among the judge's copies in memory, or None."""
    outputs = (held or {}).get(label)
    return outputs[rank] if outputs is not None else None


def on_device(value: Any, device: torch.device) -> Any:
    """``value`` (tensors, in lists and dicts, as outputs and exact records come) on ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list):
        return [on_device(v, device) for v in value]
    if isinstance(value, dict):
        return {k: on_device(v, device) for k, v in value.items()}
    return value


# Both sides' ranks together may hold this share of the host's memory (the evaluator, the worker
# and the judge's copies need the rest); no rank gets less than the floor, which a CPU rank needs
# for its address space (torch and gloo reserve about 0.7 GiB of it before any work).
HOST_MEMORY_SHARE = 0.8
RANK_MEMORY_FLOOR = 2 * 2**30
# Output files are torch.save archives of the tensors, a few KiB over their bytes; and a side's
# disk may take at most 1/8 of the host's share: two sides, the reference's room for its exact
# answers (evaluator/exact.py multiplies its disk by 3 or 7), and the ranks' own memory.
DISK_MARGIN = 1.1
DISK_HOST_PARTS = 8


def fit_to_host(per_rank: int, world_size: int) -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return per_rank
    return min(per_rank, max(RANK_MEMORY_FLOOR, int(HOST_MEMORY_SHARE * total / (2 * world_size))))


def disk_for_outputs(default: int, files_per_rank: int, bytes_per_file: int, world_size: int) -> int:
    """The side's disk: the configured size, or more where the outputs it must keep need it (the
    default-size fused all-gather + matmuls writes 576 MiB per call and rank: 8 GiB filled before
    its trials ended on 2 x H200), never more than a share of the host's memory that both sides'
    disks and ranks fit in (the disk is memory-backed)."""
    needed = int(files_per_rank * world_size * bytes_per_file * DISK_MARGIN)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return default
    return max(default, min(needed, int(HOST_MEMORY_SHARE * total / DISK_HOST_PARTS)))


def software_of(side: Optional[SideResult]) -> dict[str, str]:
    """What the side's first rank said it runs, as the report's schema has it (names and versions
    as short strings). The "ready" message comes from the rank, where candidate code can send its
    own: anything else is dropped, never a reason for the report to fail (red team,
    forges_ready_software: a string here made building the report raise, with no verdict)."""
    if side is None or not side.ready:
        return {}
    given = next(iter(side.ready.values())).get("software")
    if not isinstance(given, dict):
        return {}
    return {key[:40]: value[:200] for key, value in list(given.items())[:16]
            if isinstance(key, str) and isinstance(value, str)}


def build_seconds(side: SideResult) -> Optional[float]:
    """The slowest rank's build time: on our clock where the rank announced its builds
    (evaluator/builds.py), else the running totals its events carry (import, first call, or
    the error that ended it)."""
    if side.build_s:
        return max(side.build_s.values())
    events = list(side.ready.values()) + list(side.done.values()) + list(side.errors)
    values = [seconds for e in events if (seconds := finite_number(e.get("compile_s"))) is not None]
    return max(values) if values else None


def evaluate(config: EvalConfig, on_progress: Optional[ProgressHook] = None) -> Report:
    """Run one evaluation. Bad arguments raise ValueError; a bad candidate gives a failing report.

    ``on_progress(side, {"event", "step", "task"})`` is called as rank 0 of each side reports
    (``ready`` after import and builds, ``step`` per trial, ``times``, ``done``).
    """
    return Evaluation(config, on_progress).run()


__all__ = ["EvalConfig", "Limits", "evaluate"]
