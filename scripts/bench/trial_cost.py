"""Where the reference's time goes in one trial or re-check: each stage of
`TaskRunner.run_trial` (evaluator/rank_runner.py) timed on its own, in ranks of a process group
of their own (no sandbox, no judge).

Under the judge outside the ranks the reference re-checks every drawn call (64) after the
candidate is gone, and on 2 x H200 at the default size that `finish` phase took 29-33 s of a
74 s `pkb eval` (docs/judge.md): about 0.45 s a re-check. This says which stage that is, so the
fix goes where the time is:

    inputs    the problem's generator on the rank's device, for this seed and salt
    before    the copies the mutation check compares against
    exact     the float64 run (and its band), evaluator/exact.py
    call      the native reference call, then a device synchronize
    compare   the inputs against their copies (the mutation check)
    save      `save_outputs`: the outputs to the CPU and `torch.save` into the output folder
    residual  `save_exact`: the exact answer as residuals, to the CPU and `torch.save`

    .venv/bin/python scripts/bench/trial_cost.py --problem all-reduce --size small
    python3 scripts/bench/trial_cost.py --device cuda --size default --trials 20 --out-dir /tmp  # a GPU host

Prints its provenance and one row per stage: the slowest rank's median ms (each stage ends in a
device synchronize, so its time is its own), and the bytes each trial wrote per rank.
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
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).parent)]
import bench_ranks  # noqa: E402
import provenance  # noqa: E402
from evaluator.exact import exact_path, exact_with_band, save_exact  # noqa: E402
from evaluator.rank_runner import _tensor_equal, _tensor_inputs, as_output_list, build_groups, save_outputs  # noqa: E402
from problems import get  # noqa: E402

STAGES = ("inputs", "before", "exact", "call", "compare", "save", "residual")


def default_out_dir() -> str:
    """Where the evaluator's work folder goes (evaluator/api.py ``_workdir``): /dev/shm where it can."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def _rank(rank: int, args: argparse.Namespace, port: int, out: str) -> None:
    device = bench_ranks.join(rank, args.device, args.world_size, port)
    problem = get(args.problem)
    groups = build_groups(problem, args.world_size, rank)
    folder = Path(args.out_dir or default_out_dir()) / f"trial_cost_{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)

    def call(inputs: dict[str, Any]) -> Any:
        return problem.reference(**inputs, **groups)

    def timed(stage: str, times: dict[str, list[float]], work: Callable[[], Any]) -> Any:
        dist.barrier()  # every rank starts the stage together: a collective's wait is not the stage's
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        result = work()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times[stage].append((time.perf_counter() - started) * 1e3)
        return result

    times: dict[str, list[float]] = {stage: [] for stage in STAGES}
    written: list[int] = []
    for trial in range(args.warmup + args.trials):
        kept = times if trial >= args.warmup else {stage: [] for stage in STAGES}
        case = problem.case(args.world_size, args.size, None, rank=rank, seed=1000 + trial, device=device,
                            salt="trial-cost")
        inputs = timed("inputs", kept, lambda: problem.make_inputs(case))
        before = timed("before", kept, lambda: {name: t.clone() for name, t in _tensor_inputs(inputs).items()
                                                  if name not in problem.may_overwrite})
        exact = timed("exact", kept, lambda: exact_with_band(call, inputs, problem.decision_band))
        outputs = timed("call", kept, lambda: as_output_list(call(inputs), "reference"))
        timed("compare", kept, lambda: all(_tensor_equal(original, inputs[name]) for name, original in before.items()))
        path = folder / f"trial{trial}_rank{rank}.pt"
        timed("save", kept, lambda: save_outputs(outputs, path))
        timed("residual", kept, lambda: save_exact(outputs, exact, exact_path(path)))
        if trial >= args.warmup:
            written.append(sum(p.stat().st_size for p in (path, exact_path(path)) if p.exists()))
        for p in (path, exact_path(path)):
            p.unlink(missing_ok=True)
    folder.rmdir()
    medians = {stage: statistics.median(values) for stage, values in times.items()}
    gathered: list[Any] = [None] * args.world_size
    dist.all_gather_object(gathered, {"medians": medians, "bytes": statistics.median(written)})
    if rank == 0:
        Path(out).write_text(json.dumps(gathered))
    dist.destroy_process_group()


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per rank: the median ms of each stage and the median bytes a trial wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "trial_cost.json")
        mp.spawn(_rank, args=(args, bench_ranks.free_port(), out), nprocs=args.world_size, join=True)
        return json.loads(Path(out).read_text())


def table(ranks: list[dict[str, Any]]) -> list[str]:
    slowest = {stage: max(rank["medians"][stage] for rank in ranks) for stage in STAGES}
    total = sum(slowest.values())
    rows = ["| stage | ms (slowest rank's median) | share |", "|---|---|---|"]
    rows += [f"| {stage} | {slowest[stage]:.3f} | {slowest[stage] / total:.0%} |" for stage in STAGES]
    rows.append(f"| all | {total:.3f} | 100% |")
    rows.append(f"\nwritten per trial and rank: {max(rank['bytes'] for rank in ranks) / 2**20:.3f} MiB")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bench_ranks.setting_arguments(parser)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out-dir", help="where the trials' files go (default: where the evaluator's "
                                          "work folder goes, /dev/shm if it can)")
    args = parser.parse_args()
    for line in provenance.lines():
        print(line)
    print(f"\n{args.problem}, world size {args.world_size}, {args.device}, size {args.size}; "
          f"{args.trials} trials after {args.warmup} unrecorded\n")
    for row in table(measure(args)):
        print(row)


if __name__ == "__main__":
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast on the lent hosts
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    main()
