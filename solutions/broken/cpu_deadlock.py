"""BROKEN on purpose (all-reduce): rank 0 skips the collective and waits on a receive that never
comes; the other ranks block in the all-reduce waiting for rank 0. The harness must report
DEADLOCK within its limit and kill every rank."""

from __future__ import annotations

import torch
import torch.distributed as dist


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    if dist.get_rank(group) == 0:
        never = torch.empty(1, dtype=x.dtype, device=x.device)
        dist.recv(never, src=dist.get_global_rank(group, 1), group=group)  # nobody sends
        return out
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out
