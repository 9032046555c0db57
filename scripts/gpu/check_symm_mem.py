"""Check evaluator.cuda and the symmetric-memory solutions on this machine's GPUs.

One NCCL rank per GPU. Prints a table last. Parts:
  compile  every rank compiles the same fresh kernel at once: exactly one build, others hit the
           cache; argument conversion (float, int32, int64) gives the right result; a broken
           source raises CompileError with the NVRTC log
  correct  each solution vs NCCL on fresh random inputs, bf16 and fp32, odd and large sizes
  time     64 MiB: NCCL vs solution, CUDA events per iteration, median, max over ranks
  ext      (--ext) load_extension from every rank at once: one build
Usage: python scripts/gpu/check_symm_mem.py [--world N] [--ext] [--json PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from contract.gpu import NO_MULTICAST_ENV as NO_MULTICAST  # noqa: E402
os.environ.update(NO_MULTICAST)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from evaluator.hardware.timers import cuda_median_ms  # noqa: E402

TEST_KERNEL = r"""
extern "C" __global__ void scale_add(float* out, const float* x, float a, int n, long long tag) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + (float)(tag >> 33);
}
"""
EXT_CUDA = r"""
#include <torch/extension.h>
__global__ void twice_kernel(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.f * x[i];
}
torch::Tensor twice(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  twice_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""
EXT_CPP = "torch::Tensor twice(torch::Tensor x);"


def load_solution(rel: str):
    path = ROOT / rel
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.solution


def reference(slug: str, x: torch.Tensor, group) -> torch.Tensor:
    world = dist.get_world_size(group)
    if slug == "all-reduce":
        out = x.clone()
        dist.all_reduce(out, group=group)
    elif slug == "all-gather":
        out = torch.empty(world * x.shape[0], dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x, group=group)
    else:
        out = torch.empty(x.shape[0] // world, dtype=x.dtype, device=x.device)
        dist.reduce_scatter_tensor(out, x, group=group)
    return out


SOLUTIONS = {"all-reduce": "solutions/symm_mem/all_reduce_one_shot.py",
             "all-gather": "solutions/symm_mem/all_gather_push.py",
             "reduce-scatter": "solutions/symm_mem/reduce_scatter_pull.py"}


def input_numel(slug: str, total: int, world: int) -> int:
    return total // world if slug == "all-gather" else total


def median_us(fn, warmup: int = 10, iters: int = 50) -> float:
    return cuda_median_ms(fn, warmup, iters, align=True) * 1e3


def max_over_ranks(value: float) -> float:
    t = torch.tensor([value], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def part_compile(rank: int, rows: list) -> None:
    import evaluator.cuda as ec

    nonce = os.environ["PKB_CHECK_NONCE"]
    dist.barrier()
    torch.cuda.synchronize()
    kernels = ec.compile_kernels(TEST_KERNEL + f"// {nonce}\n", ["scale_add"])
    stats = ec.compile_stats()
    builds = torch.tensor([stats["builds"]], device="cuda")
    dist.all_reduce(builds)
    x = torch.randn(1000, device="cuda")
    out = torch.full_like(x, float("nan"))
    kernels["scale_add"](out, x, 2.5, x.numel(), 3 << 33, grid=4, block=256)
    torch.cuda.synchronize()
    # NVRTC contracts a*x+b into one FMA: compare with an absolute floor, not bit-exactly.
    ok_args = torch.allclose(out, 2.5 * x + 3.0, rtol=1e-6, atol=1e-5)
    from evaluator.cuda import nvrtc as _nv

    kern = kernels["scale_add"]
    sizes = [v[2] for v in kern._loaded.values()]
    arg_detail = (f"sizes={sizes} nan={int(out.isnan().sum())} "
                  f"err={float((out - (2.5 * x + 3.0)).abs().max()):.3g} "
                  f"first={out[:2].tolist()} want={(2.5 * x[:2] + 3.0).tolist()}")
    print(f"rank {rank} arg check: {arg_detail}", flush=True)
    compile_ok = int(builds.item()) == 1
    broken = load_solution("solutions/broken/gpu_compile_error.py")
    try:
        broken(x, group=dist.group.WORLD)
        raised, log = False, ""
    except ec.CompileError as error:
        raised, log = True, error.compiler_output
    rows.append(("compile", "one build across ranks", f"builds={int(builds.item())}",
                 f"{stats['seconds']:.3f}s", "PASS" if compile_ok else "FAIL"))
    rows.append(("compile", "arg types f32/i32/i64", arg_detail[:120], "",
                 "PASS" if ok_args else "FAIL"))
    rows.append(("compile", "CompileError on bad source", log.splitlines()[0][:60] if log else "",
                 "", "PASS" if raised and "error" in log else "FAIL"))


def part_correct(rank: int, world: int, rows: list) -> None:
    group = dist.group.WORLD
    gen = torch.Generator(device="cuda")
    for slug, rel in SOLUTIONS.items():
        solution = load_solution(rel)
        for dtype in (torch.bfloat16, torch.float32):
            for total in (4096 + 24, 2**20 + 8 * world, 16 * 2**20):
                worst, exact = 0.0, True
                for trial in range(2):
                    gen.manual_seed(1000 * rank + 10 * trial + total % 97)
                    n = input_numel(slug, total, world)
                    x = torch.randn(n, device="cuda", generator=gen).to(dtype)
                    x_before = x.clone()
                    want = reference(slug, x, group)
                    got = solution(x, group=group)
                    torch.cuda.synchronize()
                    if got.shape != want.shape or got.dtype != want.dtype:
                        worst = float("inf")
                        continue
                    err = ((got.float() - want.float()).abs()
                           / (1 + want.float().abs())).max().item()
                    worst = max(worst, err if got.isfinite().all() else float("inf"))
                    exact &= bool(torch.equal(got, want)) and bool(torch.equal(x, x_before))
                worst = max_over_ranks(worst)
                tol = 0.0 if slug == "all-gather" else (1e-2 if dtype == torch.bfloat16 else 1e-5)
                status = "PASS" if worst <= tol else "FAIL"
                rows.append(("correct", f"{slug} {str(dtype)[6:]} n={total}",
                             f"max_err/(1+|ref|)={worst:.3g}", "exact" if exact else "", status))


def part_time(rank: int, world: int, rows: list) -> None:
    group = dist.group.WORLD
    for slug, rel in SOLUTIONS.items():
        solution = load_solution(rel)
        for dtype in (torch.bfloat16, torch.float32):
            total = 64 * 2**20 // torch.empty((), dtype=dtype).element_size()
            x = torch.randn(input_numel(slug, total, world), device="cuda").to(dtype)
            t_ref = max_over_ranks(median_us(lambda: reference(slug, x, group)))
            t_sol = max_over_ranks(median_us(lambda: solution(x, group=group)))
            nbytes = 64 * 2**20
            factor = 2 * (world - 1) / world if slug == "all-reduce" else (world - 1) / world
            rows.append(("time", f"{slug} {str(dtype)[6:]} 64MiB",
                         f"nccl {t_ref:.1f}us ({nbytes / t_ref / 1e3 * factor:.0f} GB/s bus)",
                         f"sol {t_sol:.1f}us ({nbytes / t_sol / 1e3 * factor:.0f} GB/s bus)",
                         f"speedup {t_ref / t_sol:.2f}x"))


def part_ext(rank: int, rows: list) -> None:
    import evaluator.cuda as ec

    ec.reset_stats()
    dist.barrier()
    start = time.perf_counter()
    module = ec.load_extension("pkb_check_twice", EXT_CUDA, EXT_CPP, ["twice"])
    x = torch.randn(4096, device="cuda")
    ok = torch.equal(module.twice(x), 2 * x)
    builds = torch.tensor([ec.compile_stats()["builds"]], device="cuda")
    dist.all_reduce(builds)
    rows.append(("ext", "load_extension one build", f"builds={int(builds.item())}",
                 f"{time.perf_counter() - start:.1f}s",
                 "PASS" if ok and int(builds.item()) == 1 else "FAIL"))


def worker(rank: int, world: int, port: int, parts: list, queue) -> None:
    rows: list = []
    try:
        os.environ.update(NO_MULTICAST)
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, device_id=torch.device("cuda", rank))
        for part in parts:
            try:
                if part == "compile":
                    part_compile(rank, rows)
                elif part == "correct":
                    part_correct(rank, world, rows)
                elif part == "time":
                    part_time(rank, world, rows)
                elif part == "ext":
                    part_ext(rank, rows)
            except Exception:
                rows.append((part, "EXCEPTION", traceback.format_exc()[-1500:], "", "FAIL"))
                raise
        queue.put((rank, rows, None))
        dist.barrier()
        dist.destroy_process_group()
    except Exception:
        queue.put((rank, rows, traceback.format_exc()))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, default=torch.cuda.device_count())
    parser.add_argument("--parts", default="compile,correct,time")
    parser.add_argument("--json")
    args = parser.parse_args()
    os.environ.setdefault("PKB_KERNEL_CACHE", tempfile.mkdtemp(prefix="pkb-kernels-"))
    os.environ["PKB_CHECK_NONCE"] = str(time.time_ns())
    from evaluator.hardware.collectives import free_port

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, args.world, port, args.parts.split(","), queue))
             for r in range(args.world)]
    for p in procs:
        p.start()
    results = {}
    failed = False
    try:
        while len(results) < args.world:
            rank, rows, error = queue.get(timeout=400)
            results[rank] = rows
            if error:
                failed = True
                print(f"--- rank {rank} error:\n{error}", flush=True)
    finally:
        for p in procs:
            p.join(timeout=20)
            if p.is_alive():
                p.kill()
    rows = results.get(0, [])
    if args.json:
        Path(args.json).write_text(json.dumps({"world": args.world, "rows": rows}, indent=1))
    print(f"\n=== check_symm_mem world={args.world} torch={torch.__version__} ===")
    for row in rows:
        print(" | ".join(str(c) for c in row))
    bad = failed or any(r[-1] == "FAIL" for rs in results.values() for r in rs)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
