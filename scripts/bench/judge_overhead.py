"""What judging adds to a call: a bare loop of a problem's reference beside the same reference
evaluated as a candidate, alternating, in one run.

The bare loop is the reference called back to back on fixed inputs by ranks in a process group of
their own (no harness, no judge, no sandbox): blocks of calls, each timed from a barrier to its
last call's end; then the same with a barrier before every call, as the harness aligns its calls
(evaluator/rank_runner.py ``align``), to say how much of the difference that alignment is.

The judged run is `evaluate()` of an exact copy of the reference, as `pkb eval` runs it; its
report's per-call medians (the judge's clock: inputs released call by call, the side thawed and
frozen around each block) are set beside the bare loop's. The ratio of the two is the harness's
and judge's cost per call; it is on both sides of a speedup, so it pulls ratios toward 1.

    .venv/bin/python scripts/bench/judge_overhead.py --problem all-reduce --size small --runs 3
    python3 scripts/bench/judge_overhead.py --device cuda --size default --gpu-judge outside  # a GPU host
    ... --judge-release block   # the inputs of a whole block released at once (no round trip per call)

Prints its provenance and one row per run; torch and this repository only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).parent)]
import bench_ranks  # noqa: E402
import provenance  # noqa: E402
from evaluator.api import evaluate  # noqa: E402
from evaluator.config import EvalConfig  # noqa: E402
from evaluator.rank_runner import build_groups  # noqa: E402
from problems import get  # noqa: E402


def _bare_rank(rank: int, args: argparse.Namespace, port: int, out: str) -> None:
    """Rank ``rank`` of the bare loop: writes the per-rank medians (ms per call), without and with
    a barrier before each call, to ``out`` (rank 0)."""
    device = bench_ranks.join(rank, args.device, args.world_size, port)
    problem = get(args.problem)
    groups = build_groups(problem, args.world_size, rank)
    inputs = problem.make_inputs(problem.case(args.world_size, args.size, None, rank=rank, seed=1, device=device))

    def sync() -> None:
        if args.device == "cuda":
            torch.cuda.synchronize(device)

    def blocks(aligned: bool) -> float:
        per_call: list[float] = []
        for _ in range(args.blocks):
            dist.barrier()
            sync()
            started = time.perf_counter()
            for _ in range(args.calls):
                if aligned:
                    dist.barrier()
                    sync()
                problem.reference(**inputs, **groups)
            sync()
            per_call.append((time.perf_counter() - started) * 1e3 / args.calls)
        return statistics.median(per_call)

    for _ in range(args.warmup):
        problem.reference(**inputs, **groups)
    sync()
    medians: list[Any] = [None] * args.world_size
    dist.all_gather_object(medians, (blocks(aligned=False), blocks(aligned=True)))
    if rank == 0:
        Path(out).write_text(json.dumps({"per_rank_median_ms": medians}))
    dist.destroy_process_group()


def bare_loop(args: argparse.Namespace) -> tuple[float, float]:
    """The slowest rank's median per call (the collective ends on every rank together), without
    and with a barrier before each call."""
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "bare.json")
        mp.spawn(_bare_rank, args=(args, bench_ranks.free_port(), out), nprocs=args.world_size, join=True)
        medians = json.loads(Path(out).read_text())["per_rank_median_ms"]
        return max(m[0] for m in medians), max(m[1] for m in medians)


def judged(args: argparse.Namespace, copy: Path) -> dict[str, Any]:
    report = evaluate(EvalConfig(problem=args.problem, solution_path=copy, world_size=args.world_size,
                                 device=args.device, size=args.size, trials=1, seed=1,
                                 gpu_judge=args.gpu_judge, judge_release=args.judge_release))
    if report["verdict"] != "pass":
        raise SystemExit(f"the reference's copy did not pass: {report['failure']}")
    timing = report["timing"]
    return {"reference_ms": timing["reference"]["median_ms"], "candidate_ms": timing["candidate"]["median_ms"],
            "speedup": timing["speedup"], "calls": (timing.get("checks") or {}).get("timed_calls"),
            "judge": "/".join(filter(None, ((timing.get("checks") or {}).get(k) for k in ("judge", "release"))))
                     or "ranks",
            "phases": ((timing.get("checks") or {}).get("block_ms") or {}).get("reference")}


def phases_text(phases: dict[str, Any] | None) -> str:
    """The judged reference's blocks (report checks.block_ms): where its per-call time went."""
    if not phases:
        return "-"
    calls = phases["calls"]
    run_per_call = phases.get("run_per_call", phases["run"] / calls)  # reports before it was recorded
    return (f"{calls:.0f} calls: run {run_per_call:.4f}/call (judge's release "
            f"{phases.get('releasing', 0) / calls:.4f}), thaw {phases['thaw']:.3f}, "
            f"freeze {phases['freeze']:.3f}, quiet {phases['quiet']:.3f} ms/block")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bench_ranks.setting_arguments(parser)
    parser.add_argument("--gpu-judge", choices=("outside", "ranks"), default="outside")
    parser.add_argument("--judge-release", choices=("call", "block"), default="call",
                        help="the judge outside: inputs released call by call or by block (docs/judge.md)")
    parser.add_argument("--runs", type=int, default=3, help="bare loop and judged run, alternating, this many times")
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--calls", type=int, default=50, help="calls per block of the bare loop")
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    for line in provenance.lines():
        print(line)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "reference_copy.py"
        copy.write_text(f'"""An exact copy of the {args.problem} reference."""\nfrom problems import get as _get\n\n'
                        f'solution = _get({args.problem!r}).reference\n')
        print(f"\n{args.problem}, world size {args.world_size}, {args.device}, size {args.size}; "
              f"bare loop: {args.blocks} blocks of {args.calls} calls; judged: evaluate() of a copy of the reference\n")
        print("| run | bare loop ms/call | bare, barrier per call | judged reference ms/call | "
              "judged candidate ms/call | reference / bare | reference / bare with barrier | speedup | judge | "
              "timed calls | judged reference's blocks |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        ratios, aligned_ratios = [], []
        for run in range(1, args.runs + 1):
            bare, aligned = bare_loop(args)
            result = judged(args, copy)
            ratios.append(result["reference_ms"] / bare)
            aligned_ratios.append(result["reference_ms"] / aligned)
            print(f"| {run} | {bare:.4f} | {aligned:.4f} | {result['reference_ms']:.4f} | "
                  f"{result['candidate_ms']:.4f} | {ratios[-1]:.3f} | {aligned_ratios[-1]:.3f} | "
                  f"{result['speedup']:.3f} | {result['judge']} | {result['calls']} | {phases_text(result['phases'])} |",
                  flush=True)
        print(f"\nmedians over {args.runs} runs: reference / bare {statistics.median(ratios):.3f}, "
              f"reference / bare with a barrier per call {statistics.median(aligned_ratios):.3f}")


if __name__ == "__main__":
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast on the lent hosts
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    main()
