"""Running many problems' references on one rank group per world size.

CI checks every reference on gloo this way (one process launch per world size, not per problem);
on GPU hosts the same path times each reference under NCCL for docs/problems-h200.md. When a
reference fails, the group is restarted after the failing problem, so one bad problem cannot hide
the others.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import problems
from problems.spec import Problem, dtype_name

from .config import Limits, TimingConfig
from .job import RankJob, TaskSpec
from .launcher import run_side
from .roofline import roofline
from .stats import slowest_rank_per_iteration, summarize

# Same seed twice: the reference is deterministic; another seed: the inputs really are seeded.
# On GPUs the suite measures time at full size, so one trial checks that it runs and is finite.
SEEDS = {"cpu": (11, 11, 12), "cuda": (11,)}


def _task(index: int, problem: Problem, size: str, timing: Optional[TimingConfig],
          seeds: Sequence[int], dtype: Optional[str] = None) -> TaskSpec:
    return {"task": index, "problem": problem.slug, "size": size, "dtype": dtype or dtype_name(problem.default_dtype),
            "trials": [{"index": i, "seed": s} for i, s in enumerate(seeds)],
            "timing": timing.__dict__ if timing else None, "timing_seed": 13}


def _judge(result: Any, task: int, world_size: int, trials: int) -> Optional[str]:
    for rank in range(world_size):
        runs = [result.fingerprints[(task, f"trial {i}", rank)] for i in range(trials)]
        for index, out in enumerate(runs[0]):
            if not out["finite"]:
                return f"rank {rank} output {index} has NaN/Inf"
        if trials < 3:
            continue
        first, again, other = runs
        for index, (a, b) in enumerate(zip(first, again)):
            if a != b:
                return f"rank {rank} output {index} differs between two runs with the same seed"
        if first == other and any(math.prod(out["shape"]) > 1 for out in first):
            return f"rank {rank}: outputs are identical for two different seeds"
    return None


def _remaining_from(result: Any, tasks: list[dict[str, Any]], world_size: int) -> int:
    """Index into ``tasks`` of the first task not completed by every rank."""
    for position, task in enumerate(tasks):
        expected = [f"{task['task']}:trial {t['index']}" for t in task["trials"]]
        if task["timing"]:
            expected.append(f"{task['task']}:timing")
        if not all(set(expected) <= set(result.completed_steps(r)) for r in range(world_size)):
            return position
    return len(tasks)


def run_world(slugs: Sequence[str], world_size: int, *, device: str, size: str, timed: bool,
              profile: Optional[dict[str, Any]], limits: Limits, chunk: int = 1000,
              progress: bool = False, dtype: Optional[str] = None) -> list[dict[str, Any]]:
    """Rows of results; ``chunk`` problems share one rank group (smaller chunks print sooner).
    ``dtype``: run each reference in it (a problem that does not take it is skipped)."""
    chosen = [problems.get(s) for s in slugs] if slugs else list(problems.all_problems())
    rows: list[dict[str, Any]] = []
    runnable = []
    for problem in chosen:
        if dtype and dtype not in {dtype_name(d) for d in problem.dtypes}:
            rows.append({"slug": problem.slug, "world_size": world_size, "status": "skipped",
                         "message": f"takes no {dtype}"})
        elif world_size in problem.world_sizes:
            runnable.append(problem)
        else:
            rows.append({"slug": problem.slug, "world_size": world_size, "status": "skipped",
                         "message": problem.world_size_note or "world size not supported"})
    timing = (TimingConfig(min_time_s=0.3, max_time_s=1.0, max_iterations=50) if device == "cuda"
              else TimingConfig.quick()) if timed else None
    all_tasks = [_task(i, p, size, timing, SEEDS[device], dtype) for i, p in enumerate(runnable)]
    by_task = {t["task"]: p for t, p in zip(all_tasks, runnable)}
    for start in range(0, len(all_tasks), chunk):
        done = len(rows)
        rows.extend(_run_tasks(all_tasks[start:start + chunk], by_task, world_size, device=device,
                               size=size, profile=profile, limits=limits))
        if progress:
            print(format_rows(rows[done:]), flush=True)
    return rows


def _run_tasks(tasks: list[dict[str, Any]], by_task: dict[int, Problem], world_size: int, *,
               device: str, size: str, profile: Optional[dict[str, Any]], limits: Limits) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    while tasks:
        workdir = Path(tempfile.mkdtemp(prefix="pkb-suite-", dir=base))
        try:
            (workdir / "reference").mkdir()
            job: RankJob = {"side": "reference", "world_size": world_size, "device": device,
                   "backend": "nccl" if device == "cuda" else "gloo", "solution_path": None,
                   "out_dir": str(workdir / "reference"), "tasks": tasks, "outputs": "fingerprints",
                   "threads": max(1, (os.cpu_count() or 1) // world_size),
                   "collective_timeout_s": limits.total_s}
            total = Limits(startup_s=limits.startup_s, step_s=limits.step_s,
                           total_s=limits.total_s * max(1, len(tasks)))
            result = run_side(job, workdir, total, 60.0)
            stop = _remaining_from(result, tasks, world_size)
            for task in tasks[:stop]:
                rows.append(_row(by_task[task["task"]], task, world_size, result, profile, size))
            if stop < len(tasks):
                failed = tasks[stop]
                failure = result.failure or {"message": "the rank group ended early"}
                rows.append({"slug": failed["problem"], "world_size": world_size, "status": "FAIL",
                             "message": failure["message"], "traceback": failure.get("traceback")})
                tasks = tasks[stop + 1:]
            else:
                tasks = []
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return rows


def _row(problem: Problem, task: TaskSpec, world_size: int, result: Any,
         profile: Optional[dict[str, Any]], size: str) -> dict[str, Any]:
    problem_error = _judge(result, task["task"], world_size, len(task["trials"]))
    row: dict[str, Any] = {"slug": problem.slug, "version": problems.version(problem), "world_size": world_size,
                           "status": "FAIL" if problem_error else "ok", "message": problem_error or ""}
    if task["timing"]:
        events = [result.times[(task["task"], r)] for r in range(world_size)]
        summary = summarize(slowest_rank_per_iteration([e["times_ms"] for e in events]))
        row["median_ms"] = summary["median_ms"]
        row["p10_ms"], row["p90_ms"] = summary["p10_ms"], summary["p90_ms"]
        if profile is not None:
            setting = problem.setting(world_size, size)
            rl = roofline(problem.traffic(setting), profile, setting.dtype)
            row["roofline_ms"] = rl["time_ms"]
            row["roofline_bound"] = rl["bound"]
            row["roofline_fraction"] = rl["time_ms"] / summary["median_ms"]
    return row


def format_rows(rows: list[dict[str, Any]]) -> str:
    lines = []
    for row in rows:
        timing = ""
        if "median_ms" in row:
            timing = f"  {row['median_ms']:.4f} ms"
            if "roofline_fraction" in row:
                timing += f"  roofline {row['roofline_ms']:.4f} ms ({row['roofline_bound']}) {row['roofline_fraction']:.1%}"
        lines.append(f"[ws={row['world_size']}] {row['status']:<7} {row['slug']:<42}{timing} {row['message']}")
    return "\n".join(lines)


def check_references(slugs: Sequence[str], world_sizes: Sequence[int], *, device: str = "cpu",
                     size: str = "small", timed: bool = False, hardware: Optional[str] = None,
                     json_path: Optional[Path] = None, limits: Limits = Limits(step_s=120.0),
                     chunk: int = 1000, dtype: Optional[str] = None) -> bool:
    from .api import hardware_profile

    all_rows = []
    for world_size in world_sizes:
        profile = hardware_profile(device, world_size, hardware) if timed else None
        started = time.monotonic()
        rows = run_world(slugs, world_size, device=device, size=size, timed=timed, profile=profile,
                         limits=limits, chunk=chunk, progress=True, dtype=dtype)
        print(f"[ws={world_size}] {len(rows)} problems in {time.monotonic() - started:.1f} s", flush=True)
        all_rows.extend(rows)
    if json_path:
        json_path.write_text(json.dumps({"device": device, "size": size, "rows": all_rows}, indent=1))
    return all(row["status"] != "FAIL" for row in all_rows)
