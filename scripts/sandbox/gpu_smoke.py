"""One GPU inside the sandbox: what a candidate's rank needs works confined, and costs the same.

    python3 scripts/sandbox/gpu_smoke.py [--rounds 2]

Runs one rank, confined and unconfined in alternating rounds, that initialises CUDA, builds and
runs an NVRTC kernel (evaluator.cuda), a load_inline extension and a Triton kernel, sets up an
NCCL process group of one and a symmetric-memory buffer, then times a 256 MiB device copy and a
64 MiB bf16 NCCL all-reduce with CUDA events. Prints one table. For hosts with a single GPU;
multi-GPU hosts run `scripts/device/gpu_batch.sh sandbox`, which goes through `pkb eval`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from evaluator.config import ResourceLimits  # noqa: E402
from evaluator.sandbox import RankLaunch, open_box  # noqa: E402
from evaluator.sandbox.policy import rank_env  # noqa: E402

RANK = r'''
import json, os, statistics, sys, time
sys.path.insert(0, REPO)
import torch, torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
res = {"uid": os.getuid()}
t = time.perf_counter(); torch.cuda.init(); x = torch.randn(1 << 26, device="cuda"); torch.cuda.synchronize()
res["cuda_init_s"] = time.perf_counter() - t
from evaluator.cuda import compile_kernels, load_extension
t = time.perf_counter()
k = compile_kernels('extern "C" __global__ void scale(float* o, const float* i, float a, long long n)'
                    '{ long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (j < n) o[j] = a * i[j]; }',
                    ["scale"])["scale"]
y = torch.empty_like(x); k(y, x, 2.0, x.numel(), grid=(x.numel() + 255) // 256, block=256)
res["nvrtc_ok"] = bool(torch.equal(y, 2 * x)); res["nvrtc_s"] = time.perf_counter() - t
t = time.perf_counter()
ext = load_extension("pkb_smoke_neg", "__global__ void neg(float* o, const float* i, long long n) { long long j ="
                     " blockIdx.x * (long long)blockDim.x + threadIdx.x; if (j < n) o[j] = -i[j]; }\n"
                     "void run(torch::Tensor o, torch::Tensor i) { neg<<<(i.numel() + 255) / 256, 256>>>("
                     "o.data_ptr<float>(), i.data_ptr<float>(), i.numel()); }",
                     "void run(torch::Tensor o, torch::Tensor i);", ["run"])
ext.run(y, x); torch.cuda.synchronize()
res["load_inline_ok"] = bool(torch.equal(y, -x)); res["load_inline_s"] = time.perf_counter() - t
import triton, triton.language as tl
@triton.jit
def add_one(o, i, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o + offs, tl.load(i + offs, mask=offs < n) + 1.0, mask=offs < n)
t = time.perf_counter(); add_one[(triton.cdiv(x.numel(), 1024),)](y, x, x.numel(), BLOCK=1024); torch.cuda.synchronize()
res["triton_ok"] = bool(torch.equal(y, x + 1)); res["triton_s"] = time.perf_counter() - t
dist.init_process_group("nccl", store=dist.FileStore(os.path.join(os.getcwd(), "store"), 1), rank=0,
                        world_size=1, device_id=torch.device("cuda", 0))
buf = symm_mem.empty(1 << 20, dtype=torch.bfloat16, device="cuda")
handle = symm_mem.rendezvous(buf, dist.group.WORLD.group_name); handle.barrier(channel=0)
res["symm_mem_ok"] = len(handle.buffer_ptrs) == 1
def timed(fn, calls=60):
    for _ in range(10): fn()
    out = []
    for _ in range(calls):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); out.append(a.elapsed_time(b))
    return statistics.median(out)
big, dst = torch.empty(1 << 26, device="cuda"), torch.empty(1 << 26, device="cuda")
res["copy_256MiB_ms"] = timed(lambda: dst.copy_(big))
ar = torch.ones(1 << 25, dtype=torch.bfloat16, device="cuda")
res["nccl_all_reduce_64MiB_ms"] = timed(lambda: dist.all_reduce(ar))
print("RESULT " + json.dumps(res), flush=True)
os._exit(0)
'''


def run_rank(confined: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="pkb-gpu-smoke-") as tmp:
        inbox = Path(tmp) / "in"
        inbox.mkdir()
        box = open_box(Path(tmp), inbox, "cuda", ResourceLimits(), confined=confined)
        read, write = os.pipe()
        stdin = os.open(os.devnull, os.O_RDONLY)
        env = rank_env("cuda", 4, home=box.home, work=box.work, confined=confined)
        # A file, not `-c`: Triton reads a kernel's source from the file that defines it.
        (inbox / "smoke.py").write_text(RANK.replace("REPO", repr(str(REPO))))
        started = time.perf_counter()
        box.start([RankLaunch(0, [sys.executable, "-I", str(box.inbox / "smoke.py")], env, (), write, stdin)])
        os.close(write)
        os.close(stdin)
        output = b""
        while chunk := os.read(read, 65536):
            output += chunk
        box.stop()
        box.close()
        os.close(read)
        text = output.decode(errors="replace")
        lines = [line for line in text.splitlines() if line.startswith("RESULT ")]
        if not lines:
            return {"error": text[-3000:]}
        result = json.loads(lines[-1][len("RESULT "):])
        result["wall_s"] = time.perf_counter() - started
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    print(f"# {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {platform.node()}, Python "
          f"{platform.python_version()}, commit {commit}")
    rows = []
    for round_ in range(args.rounds):
        for confined in ((True, False) if round_ % 2 == 0 else (False, True)):
            result = run_rank(confined)
            rows.append((round_, confined, result))
            if "error" in result:
                print(f"round {round_} {'confined' if confined else 'plain'} FAILED:\n{result['error']}")
    keys = ["uid", "cuda_init_s", "nvrtc_ok", "nvrtc_s", "load_inline_ok", "load_inline_s", "triton_ok",
            "triton_s", "symm_mem_ok", "copy_256MiB_ms", "nccl_all_reduce_64MiB_ms", "wall_s"]
    print("| round | sandbox | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 2) + "|")
    for round_, confined, result in rows:
        cells = [f"{result.get(k):.4f}" if isinstance(result.get(k), float) else str(result.get(k, "-")) for k in keys]
        print(f"| {round_} | {'on' if confined else 'off'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
