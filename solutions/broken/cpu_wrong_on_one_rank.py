"""BROKEN on purpose (all-reduce): right everywhere except group rank 1, which adds 0.1.
The harness must report VALUE_MISMATCH on rank 1 only."""

from __future__ import annotations

import torch
import torch.distributed as dist


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    if dist.get_rank(group) == 1:
        out += 1e-1
    return out
