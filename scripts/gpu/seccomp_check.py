"""Does a GPU rank's work run under the sandbox's system-call filter (evaluator/sandbox/seccomp.py)?

One process with no_new_privs, no capabilities and the filter installed, as a confined rank has them, does what
ranks do on a GPU host, step by step, and prints ok or the error of each: CUDA and a matmul, an
NCCL communicator (world size 1, a TCP store on the loopback) and an all-reduce, PyTorch's
symmetric memory (allocation and rendezvous), a Triton kernel compiled and run, a CUDA torch
extension built with nvcc and run, a subprocess. Then the refused calls, which must still fail.

    python3 scripts/gpu/seccomp_check.py || python3 scripts/gpu/seccomp_check.py --unfiltered
    (two GPUs add a step: symmetric memory between two ranks)
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533", "NCCL_SOCKET_IFNAME": "lo"})
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evaluator.sandbox import libc as libc_sandbox  # noqa: E402
from evaluator.sandbox import seccomp  # noqa: E402

STEPS: list[tuple[str, object]] = []


def step(name: str):
    def register(fn):
        STEPS.append((name, fn))
        return fn
    return register


@step("cuda matmul")
def cuda_matmul() -> str:
    import torch
    a = torch.randn(2048, 2048, device="cuda")
    return f"{float((a @ a).float().abs().sum()):.3g}"


@step("nccl all-reduce")
def nccl() -> str:
    import torch
    import torch.distributed as dist
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x)
    dist.barrier()
    torch.cuda.synchronize()
    return f"sum {float(x.sum()):.0f}"


@step("symmetric memory")
def symmetric_memory() -> str:
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem
    buffer = symm_mem.empty(1 << 20, device="cuda", dtype=torch.bfloat16)
    handle = symm_mem.rendezvous(buffer, dist.group.WORLD.group_name)
    buffer.fill_(1)
    handle.barrier()
    torch.cuda.synchronize()
    return f"world {handle.world_size}"


@step("triton kernel")
def triton_kernel() -> str:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)

    x = torch.arange(4096, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    twice[(4,)](x, out, 4096, BLOCK=1024)
    torch.cuda.synchronize()
    assert torch.equal(out, x * 2)
    return "equal"


@step("cuda extension build")
def extension() -> str:
    import torch
    from torch.utils.cpp_extension import load_inline
    source = """
    __global__ void add_one(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }
    torch::Tensor bump(torch::Tensor x) { add_one<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), x.numel()); return x; }
    """
    began = time.perf_counter()
    module = load_inline("pkb_seccomp_check", cpp_sources="torch::Tensor bump(torch::Tensor x);",
                         cuda_sources=source, functions=["bump"], build_directory=tempfile.mkdtemp(),
                         extra_cuda_cflags=["-O2"])
    x = torch.zeros(1000, device="cuda")
    module.bump(x)
    torch.cuda.synchronize()
    assert float(x.sum()) == 1000
    return f"built in {time.perf_counter() - began:.0f} s"


@step("subprocess")
def subprocess_step() -> str:
    import subprocess
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout.split("\n")[0][:60]


TWO_RANKS = r"""
import ctypes, os, sys
sys.path.insert(0, sys.argv[1])
rank = int(sys.argv[2])
from evaluator.sandbox import libc as libc_sandbox, seccomp
assert ctypes.CDLL(None).prctl(38, 1, 0, 0, 0) == 0
if sys.argv[3] == "filtered":
    libc_sandbox.drop_capabilities()
    seccomp.install()
import torch, torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
torch.cuda.set_device(rank)
dist.init_process_group("gloo", rank=rank, world_size=2, init_method="tcp://127.0.0.1:29534")
buffer = symm_mem.empty(1 << 20, device="cuda", dtype=torch.float32)
handle = symm_mem.rendezvous(buffer, dist.group.WORLD.group_name)
buffer.fill_(rank + 1)
torch.cuda.synchronize()
handle.barrier()
peer = handle.get_buffer(1 - rank, (1 << 20,), torch.float32)
seen = float(peer.sum())
handle.barrier()
torch.cuda.synchronize()
print(f"rank {rank} read its peer's {seen:.0f}", flush=True)
assert seen == (2 - rank) * (1 << 20)
dist.destroy_process_group()
"""


@step("symmetric memory, 2 ranks")
def two_ranks() -> str:
    """Two ranks, one GPU each, exchange their allocations (the descriptors cross between the
    processes) and read each other's. Needs two GPUs: symmetric memory refuses two ranks on one
    ("allocations from overlapping devices", seen on one H200 with and without the filter)."""
    import subprocess

    import torch
    if torch.cuda.device_count() < 2:
        return "skipped: one GPU visible"
    mode = "unfiltered" if "--unfiltered" in sys.argv else "filtered"
    repo = str(Path(__file__).resolve().parents[2])
    ranks = [subprocess.Popen([sys.executable, "-c", TWO_RANKS, repo, str(rank), mode], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for rank in range(2)]
    outs = [rank.communicate(timeout=120)[0] for rank in ranks]
    if any(rank.returncode for rank in ranks):
        raise RuntimeError(" | ".join(out.strip()[-600:] for out in outs))
    return "; ".join(out.strip().splitlines()[-1] for out in outs)


def refused_still() -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    numbers = libc_sandbox.SYSCALLS[os.uname().machine]
    out = []
    for name, args in (("unshare", (0x10000000,)), ("io_uring_setup", (4, 0)), ("userfaultfd", (0,))):
        ctypes.set_errno(0)
        result = libc.syscall(ctypes.c_long(numbers[name]), *(ctypes.c_long(a) for a in args))
        out.append(f"{name} {result}/{ctypes.get_errno()}")
    return ", ".join(out)


def main() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(38, 1, 0, 0, 0) == 0
    if "--unfiltered" not in sys.argv:  # the control: what fails without the filter is not its doing
        libc_sandbox.drop_capabilities()  # as a rank: no capability, then the filter
        seccomp.install()
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    print(f"== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} seccomp_check, filter mode "
          f"{status['Seccomp'].strip()}, capabilities {status['CapEff'].strip()}", flush=True)
    failed = 0
    for name, fn in STEPS:
        began = time.perf_counter()
        try:
            detail = fn()  # type: ignore[operator]
            print(f"{name:22s} ok      {time.perf_counter() - began:6.1f} s  {detail}", flush=True)
        except Exception as exc:  # every step runs, each says what went wrong
            failed += 1
            print(f"{name:22s} FAILED  {time.perf_counter() - began:6.1f} s  {exc!r}", flush=True)
            traceback.print_exc(limit=4)
    print(f"{'refused calls':22s} {refused_still()}", flush=True)
    import torch.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
