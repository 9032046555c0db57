"""What the top-p decision band costs on a GPU, and whether it holds at the default size.

Runs the three vocab-parallel log-prob problems (forward, chunked, backward) at their default
size on one GPU, as one rank of an NCCL group of one (the reference's all-to-alls are then
copies; the evaluator itself needs two GPUs). For each it times, with the device synchronised:
the native reference call, the exact answer alone (float64), and the exact answer with the
decision band (three float64 runs: evaluator/exact.py, exact_with_band); reads the peak device
memory of each; counts the elements whose exact answer is an interval; and judges two
candidates against the band and without it: a copy of the reference and the honest filter that
sums the mass from the top (tests/evaluator/decisions/descending_top_p.py). torch only.

    PKB_COMMIT=<sha> python3 scripts/gpu/decision_band_cost.py --seeds 2 --out $OUT/decision_band_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable
from unittest import mock

for name, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                    ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[name] = value  # never NVLink multicast, in any process this starts

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import problems  # noqa: E402
from evaluator.compare import compare_output  # noqa: E402
from evaluator.exact import exact_outputs, exact_with_band, residual_record  # noqa: E402
from problems.spec import Case  # noqa: E402
from tests.evaluator.decisions.descending_top_p import descending_filter  # noqa: E402

SLUGS = ("vocab-parallel-logprobs-top-k-top-p", "vocab-parallel-logprobs-top-k-top-p-chunked",
         "vocab-parallel-logprobs-top-k-top-p-backward")


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, seconds, peak GiB above the start) of one synchronised call."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    start = time.perf_counter()
    result = fn()
    torch.cuda.synchronize()
    return result, time.perf_counter() - start, (torch.cuda.max_memory_allocated() - base) / 2**30


def as_list(result: Any) -> list[torch.Tensor]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def measure(slug: str, seed: int, dtype: torch.dtype) -> dict[str, Any]:
    problem = problems.get(slug)
    params = dict(problem.sizes["default"])
    case = Case(world_size=1, size="default", dtype=dtype, params=params, rank=0, seed=seed,
                device=torch.device("cuda"))
    inputs = problem.make_inputs(case)

    def call(given: dict[str, Any]) -> Any:
        return problem.reference(**given, tp_group=dist.group.WORLD)

    call(inputs)  # warm: kernels, NCCL's first collective
    native, native_s, native_gib = timed(lambda: as_list(call(inputs)))
    exact, exact_s, exact_gib = timed(lambda: exact_outputs(call, inputs))
    del exact
    banded, band_s, band_gib = timed(lambda: exact_with_band(call, inputs, problem.decision_band))
    records = residual_record(native, banded)
    del banded
    module = sys.modules[problem.reference.__module__]
    with mock.patch.object(module, "top_k_top_p", descending_filter):
        descending = as_list(call(inputs))
    tol = problem.tolerance(dtype)
    verdicts = {}
    for name, outputs in (("copy", native), ("descending", descending)):
        for judge, recs in (("band", records),
                            ("no_band", [{k: v for k, v in r.items() if k not in ("low", "high")}
                                         for r in records])):
            checks = [compare_output(i, got.cpu(), want.cpu(), tol, rec)
                      for i, (got, want, rec) in enumerate(zip(outputs, native, recs))]
            verdicts[f"{name}/{judge}"] = {
                "status": [c["status"] for c in checks],
                "candidate_rms": [c["candidate_err"]["rms"] if c["candidate_err"] else None for c in checks],
                "banded": [c["rule"].get("decision_band_elements") for c in checks]}
    return {"slug": slug, "seed": seed, "dtype": str(dtype).removeprefix("torch."),
            "numel": [t.numel() for t in native], "native_s": native_s, "native_peak_gib": native_gib,
            "exact_s": exact_s, "exact_peak_gib": exact_gib, "band_s": band_s, "band_peak_gib": band_gib,
            "verdicts": verdicts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1,
                            device_id=torch.device("cuda:0"))
    dtype = getattr(torch, args.dtype)
    rows = []
    try:
        for slug in SLUGS:
            for seed in range(args.seeds):
                row = measure(slug, seed, dtype)
                rows.append(row)
                v = row["verdicts"]
                print(f"{slug:46} seed {seed}  native {row['native_s']:6.3f} s  exact {row['exact_s']:6.2f} s"
                      f" ({row['exact_peak_gib']:5.1f} GiB)  exact+band {row['band_s']:6.2f} s"
                      f" ({row['band_peak_gib']:5.1f} GiB)  banded {v['copy/band']['banded']}"
                      f"  descending: band {v['descending/band']['status']} / no band"
                      f" {v['descending/no_band']['status']}", flush=True)
    finally:
        dist.destroy_process_group()
    provenance = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(),
                  "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                  # The device's checkout may predate the working tree it was sent: PKB_COMMIT wins.
                  "commit": os.environ.get("PKB_COMMIT") or subprocess.run(
                      ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                      text=True).stdout.strip() or None,
                  "command": " ".join(sys.argv)}
    if args.out:
        args.out.write_text(json.dumps({"provenance": provenance, "rows": rows}, indent=1))
    print(json.dumps(provenance))


if __name__ == "__main__":
    main()
