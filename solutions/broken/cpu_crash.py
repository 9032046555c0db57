"""BROKEN on purpose (all-reduce): rank 1 aborts the process once the call starts; the other
ranks are left waiting in the all-reduce. The harness must report CRASH (rank 1) and kill the rest."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    if dist.get_rank(group) == 1:
        os.abort()
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out
