"""BROKEN on purpose (all-reduce, for sweeps): right at every size except a buffer of exactly
8192 elements (16 KiB of bf16), where every element is off by 1.0. A sweep over 4, 16 and 64 KiB
must pass 4 and 64 KiB and report VALUE_MISMATCH at 16 KiB only."""

from __future__ import annotations

import torch
import torch.distributed as dist

WRONG_NUMEL = 8192


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    if out.numel() == WRONG_NUMEL:
        out += 1.0
    return out
