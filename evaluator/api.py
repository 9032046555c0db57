"""``evaluate(config) -> Report``: one whole evaluation of a candidate against a problem.

Order: static checks in the parent (the file parses; it is never imported here), the candidate's
ranks (trials, then timing), the hashes of what they wrote, the reference's ranks (same seeds,
same timing), then the comparison and the scores. The candidate runs first so that reference
outputs do not exist on disk while candidate code runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import os
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import torch

import problems
from problems.spec import _derive_seed, dtype_name

from . import __version__
from .compare import compare_outputs, describe
from .config import EvalConfig, Limits
from .exact import exact_path, load_exact, room_for_exact
from .job import CHECKED_COPIES, RankJob, TaskSpec, TrialSpec, call_seed
from .launcher import ProgressHook, SideResult, run_side
from .report import (SCHEMA_VERSION, Failure, FailureClass, RankCheck, Report, SideTiming,
                     Timing, Trial, WallTime, make_failure)
from .roofline import roofline
from .sandbox import unavailable_reason
from .static_checks import read_solution, resolve_dtype, static_failure
from .stats import slowest_rank_per_iteration, summarize

# Work that keeps running on another stream after the solution returned shows up as a gap
# between the timed stream's end event and a device-wide synchronize.
ESCAPED_GAP_MS = 0.05
ESCAPED_GAP_SHARE = 0.25


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
    return profiles.default_profile(device, world_size)


class Evaluation:
    def __init__(self, config: EvalConfig, on_progress: Optional[ProgressHook] = None) -> None:
        self.config = config
        self.on_progress = on_progress
        self.problem = problems.get(config.problem)
        self.dtype = resolve_dtype(self.problem, config.dtype)
        self.problem.check_setting(config.world_size, config.size, self.dtype)
        if config.trials < 1:
            raise ValueError(f"--trials must be at least 1 (5 is the default), not {config.trials}")
        if config.device == "cuda" and torch.cuda.device_count() < config.world_size:
            raise ValueError(f"world size {config.world_size} needs {config.world_size} GPUs; "
                             f"this host has {torch.cuda.device_count()}")
        if config.sandbox and (reason := unavailable_reason()) is not None:
            raise ValueError(f"this host cannot confine candidate code ({reason}); see docs/sandbox.md, "
                             "or pass --no-sandbox (EvalConfig(sandbox=False)) to run it unconfined")
        self.source = read_solution(config.solution_path)
        base = config.seed if config.seed is not None else secrets.randbelow(2**31)
        self.seeds = [_derive_seed(base, "trial", i) % 2**31 for i in range(config.trials)]
        self.timing_seed = _derive_seed(base, "timing") % 2**31
        self.timing = config.resolved_timing() if config.timing else None
        self.profile = (hardware_profile(config.device, config.world_size, config.hardware_profile)
                        if config.timing else None)
        self.started_at = _now()
        self.started_clock = time.monotonic()

    def job(self, side: str, workdir: Path, timed_calls: Sequence[int] = ()) -> RankJob:
        """``timed_calls``: candidate calls whose outputs the reference recomputes as extra trials."""
        out_dir = workdir / side  # where the side's outputs land once all of its processes are gone
        out_dir.mkdir(exist_ok=True)
        cpus = os.cpu_count() or 1
        trials: list[TrialSpec] = [{"index": i, "seed": s} for i, s in enumerate(self.seeds)]
        trials += [{"index": len(trials) + i, "seed": call_seed(self.timing_seed, n), "label": f"recheck of timed call {n}"}
                   for i, n in enumerate(timed_calls)]
        task: TaskSpec = {
            "task": 0, "problem": self.problem.slug, "size": self.config.size,
            "dtype": dtype_name(self.dtype),
            "trials": trials,
            "timing": self.timing.__dict__ if self.timing else None,
            "timing_seed": self.timing_seed,
        }
        return {
            "side": side, "world_size": self.config.world_size, "device": self.config.device,
            "backend": "nccl" if self.config.device == "cuda" else "gloo",
            "solution_path": str(self.config.solution_path.resolve()) if side == "candidate" else None,
            "out_dir": str(out_dir), "tasks": [task],
            "threads": max(1, cpus // self.config.world_size),
            "collective_timeout_s": self.config.limits.total_s,
        }

    def run_side(self, side: str, workdir: Path, timed_calls: Sequence[int] = ()) -> SideResult:
        return run_side(self.job(side, workdir, timed_calls), workdir, self.side_limits(side), self.timing_limit(),
                        self.on_progress, sandbox=self.config.sandbox,
                        resources=room_for_exact(self.config.resources) if side == "reference" else self.config.resources)

    def side_limits(self, side: str) -> Limits:
        """The configured limits, the side's total cut to fit the deadline: the candidate gets
        at most half of what is left, the reference the rest (less a few seconds to judge)."""
        limits = self.config.limits
        if self.config.deadline_s is None:
            return limits
        left = self.config.deadline_s - (time.monotonic() - self.started_clock)
        share = left / 2 if side == "candidate" else left - 5.0
        return dataclasses.replace(limits, total_s=max(1.0, min(limits.total_s, share)))

    def timing_limit(self) -> float:
        """Seconds the timed phase may take: its own caps, generously, plus input copies."""
        if not self.timing:
            return 0.0
        return (self.timing.max_time_s + self.timing.warmup_time_s) * 3 + 30

    def run(self) -> Report:
        static = static_failure(self.source)
        if static is not None:
            return self.report(static, [], None, None, None)
        with _workdir(self.config) as workdir:
            candidate = self.run_side("candidate", workdir)
            if not candidate.ok:
                return self.report(candidate.failure, [], None, candidate, None)
            hashes = _hash_outputs(workdir / "candidate")
            timed_calls, missing = self.timed_calls(candidate, workdir / "candidate")
            if missing is not None:
                return self.report(missing, [], None, candidate, None)
            reference = self.run_side("reference", workdir, timed_calls)
            if not reference.ok:
                return self.report(reference.failure, [], None, candidate, reference)
            changed = [name for name, digest in _hash_outputs(workdir / "candidate").items()
                       if hashes.get(name) != digest]
            if changed:
                tampered = make_failure(FailureClass.PROTOCOL_VIOLATION,
                                    f"candidate output files changed after its ranks finished: {changed[:3]}")
                return self.report(tampered, [], None, candidate, reference)
            trials, failure = self.judge(workdir, timed_calls)
            timing = None
            if failure is None and self.timing:
                timing, failure = self.score(candidate, reference)
            return self.report(failure, trials, timing, candidate, reference)

    def timed_calls(self, candidate: SideResult, outputs: Path) -> tuple[list[int], Optional[Failure]]:
        """The timed calls whose outputs the candidate's ranks kept: the latest call in each of
        the first CHECKED_COPIES slots of the input rotation, the same on every rank."""
        if not self.timing:
            return [], None
        event = candidate.times.get((0, 0)) or {}
        calls, count = len(event.get("times_ms") or []), int(event.get("copies") or 0)
        expected = sorted(n for n in range(max(0, calls - count), calls) if n % max(count, 1) < CHECKED_COPIES)
        for rank in range(self.config.world_size):
            found = sorted(int(m.group(1)) for p in outputs.glob(f"task0_timed*_rank{rank}.pt")
                           if (m := re.fullmatch(rf"task0_timed(\d+)_rank{rank}\.pt", p.name)))
            if found != expected or not expected:
                return [], make_failure(FailureClass.PROTOCOL_VIOLATION,
                                        f"rank {rank}: the outputs of timed calls {expected} were expected, "
                                        f"found {found[:8]}", rank=rank)
        return expected, None

    def judge(self, workdir: Path, timed_calls: Sequence[int] = ()) -> tuple[list[Trial], Optional[Failure]]:
        tol = self.problem.tolerance(self.dtype)
        trials: list[Trial] = []
        failure: Optional[Failure] = None
        labels = [(i, s, "correctness", f"trial{i}", f"trial{i}") for i, s in enumerate(self.seeds)]
        # Timed calls, recomputed by the reference as trials after the seeded ones.
        labels += [(len(self.seeds) + i, call_seed(self.timing_seed, n), "timed", f"timed{n}",
                    f"trial{len(self.seeds) + i}") for i, n in enumerate(timed_calls)]
        for index, seed, kind, label, reference_label in labels:
            ranks: list[RankCheck] = []
            for rank in range(self.config.world_size):
                reference_path = workdir / "reference" / f"task0_{reference_label}_rank{rank}.pt"
                want = torch.load(reference_path, weights_only=True)
                exact = load_exact(exact_path(reference_path))
                got = _load_candidate_outputs(workdir / "candidate" / f"task0_{label}_rank{rank}.pt")
                if got is None:
                    # The harness writes every file before its rank says "done": a missing or
                    # unreadable one means candidate code got in the way.
                    return trials, make_failure(FailureClass.PROTOCOL_VIOLATION,
                                            f"rank {rank}: no readable outputs for {label} although the "
                                            "rank reported success", rank=rank, trial=index)
                checks = compare_outputs(got, want, tol, exact)
                ranks.append(RankCheck(rank=rank, passed=all(c["status"] == "ok" for c in checks), outputs=checks))
                bad = next((c for c in checks if c["status"] != "ok"), None)
                if bad is not None and failure is None:
                    what = f"timed call {label.removeprefix('timed')}" if kind == "timed" else f"trial {index}"
                    failure = make_failure(FailureClass(bad["status"]), f"rank {rank}, {what}: {describe(bad)}",
                                       rank=rank, trial=index, output=bad["index"])
            trials.append(Trial(index=index, seed=seed, kind=kind,  # type: ignore[typeddict-item]
                                passed=all(r["passed"] for r in ranks), ranks=ranks))
        return trials, failure

    def side_timing(self, side: SideResult) -> tuple[SideTiming, dict[str, Any]]:
        events = [side.times[(0, rank)] for rank in range(self.config.world_size)]
        iterations = slowest_rank_per_iteration([e["times_ms"] for e in events])
        summary = summarize(iterations)
        per_rank = [summarize(e["times_ms"])["median_ms"] for e in events]
        timing = SideTiming(per_rank_median_ms=per_rank, roofline_fraction=None, **summary)  # type: ignore[typeddict-item]
        gaps = [g for e in events for g in e["gap_ms"]]
        escaped = sum(1 for g, t in zip(gaps, [t for e in events for t in e["times_ms"]])
                      if g > max(ESCAPED_GAP_MS, ESCAPED_GAP_SHARE * t))
        return timing, {"escaped": escaped, "iterations": len(gaps), "copies": events[0]["copies"],
                        "warmup": events[0]["warmup"]}

    def score(self, candidate: SideResult, reference: SideResult) -> tuple[Optional[Timing], Optional[Failure]]:
        cand, cand_info = self.side_timing(candidate)
        ref, _ = self.side_timing(reference)
        failure = None
        if self.config.device == "cuda" and cand_info["escaped"] > cand_info["iterations"] // 2:
            failure = make_failure(FailureClass.TIMING_VIOLATION,
                               f"in {cand_info['escaped']} of {cand_info['iterations']} timed calls, GPU work "
                               "kept running after the solution returned (on a stream the caller does not "
                               "wait for); make the current stream wait for side streams before returning")
        rl = None
        if self.profile is not None:
            rl = roofline(self.problem.traffic(self.problem.setting(self.config.world_size, self.config.size,
                                                                     self.dtype)), self.profile, self.dtype)
            cand["roofline_fraction"] = rl["time_ms"] / cand["median_ms"]
            ref["roofline_fraction"] = rl["time_ms"] / ref["median_ms"]
        timing = Timing(
            device=self.config.device, method=_METHOD[self.config.device],
            input_copies=cand_info["copies"], warmup_iterations=cand_info["warmup"],
            reference=ref, candidate=cand, speedup=ref["median_ms"] / cand["median_ms"], roofline=rl)
        return timing, failure

    def report(self, failure: Optional[Failure], trials: list[Trial], timing: Optional[Timing],
               candidate: Optional[SideResult], reference: Optional[SideResult]) -> Report:
        software = {}
        if candidate is not None and candidate.ready:
            software = dict(next(iter(candidate.ready.values())).get("software") or {})
        compile_s = None
        if candidate is not None:
            # Builds can happen at import (before READY) or on the first call (before DONE);
            # each event carries the rank's running total.
            events = list(candidate.ready.values()) + list(candidate.done.values())
            values = [e["compile_s"] for e in events if isinstance(e.get("compile_s"), (int, float))]
            compile_s = max(values) if values else None
        finished = _now()
        total = (datetime.datetime.fromisoformat(finished) - datetime.datetime.fromisoformat(self.started_at))
        return Report(
            schema_version=SCHEMA_VERSION, evaluator_version=__version__,
            problem={"slug": self.problem.slug, "id": self.problem.id, "version": problems.version(self.problem)},
            setting={"world_size": self.config.world_size, "size": self.config.size,
                     "dtype": dtype_name(self.dtype), "device": self.config.device,
                     "backend": "nccl" if self.config.device == "cuda" else "gloo",
                     "trials": self.config.trials},
            solution={"sha256": hashlib.sha256(self.source).hexdigest(), "bytes": len(self.source)},
            verdict="pass" if failure is None else "fail",
            failure=failure, trials=trials, timing=timing,
            hardware_profile=self.profile["id"] if self.profile else None,
            sandbox="on" if self.config.sandbox else "off",
            software=software,
            wall_time=WallTime(total_s=max(total.total_seconds(), 0.0),
                               reference_s=reference.wall_s if reference else 0.0,
                               candidate_s=candidate.wall_s if candidate else 0.0,
                               compile_s=compile_s),
            started_at=self.started_at, finished_at=finished,
        )


_METHOD = {
    "cuda": ("CUDA events on every rank around each call, ranks aligned by an all-reduce before each "
             "call, iteration time = slowest rank, inputs rotated across copies spanning several L2s"),
    "cpu": "perf_counter on every rank around each call, ranks aligned by a barrier; CPU timings only",
}


def _load_candidate_outputs(path: Path) -> Optional[list[torch.Tensor]]:
    try:
        outputs = torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001 - missing, truncated or not a tensor file: all the same here
        return None
    if not isinstance(outputs, list) or not all(isinstance(t, torch.Tensor) for t in outputs):
        return None
    return outputs


def _hash_outputs(folder: Path) -> dict[str, str]:
    digests = {}
    for path in sorted(folder.glob("*.pt")):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        digests[path.name] = digest.hexdigest()
    return digests


def evaluate(config: EvalConfig, on_progress: Optional[ProgressHook] = None) -> Report:
    """Run one evaluation. Bad arguments raise ValueError; a bad candidate gives a failing report.

    ``on_progress(side, {"event", "step", "task"})`` is called as rank 0 of each side reports
    (``ready`` after import and builds, ``step`` per trial, ``times``, ``done``).
    """
    return Evaluation(config, on_progress).run()


__all__ = ["EvalConfig", "Limits", "evaluate"]
