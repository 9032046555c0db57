"""BROKEN on purpose (all-reduce): the CUDA source does not compile (undeclared name, missing
semicolon). evaluator.cuda raises CompileError; the harness must report COMPILE_ERROR with
the NVRTC log."""

from __future__ import annotations

import torch
import torch.distributed as dist

from evaluator.cuda import compile_kernels

SOURCE = r"""
extern "C" __global__ void add_one(float* x, long long n) {
  long long i = blockIdx.x * blockDim.x + threadIdx.x
  if (i < n) x[i] += undeclared_value;
}
"""


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    kernel = compile_kernels(SOURCE, ["add_one"])["add_one"]
    out = x.clone()
    dist.all_reduce(out, group=group)
    kernel(out, out.numel(), grid=1, block=1)
    return out
