"""BROKEN on purpose (all-reduce): right everywhere except one element on group rank 1, off by
1.0 (well outside the bf16 tolerance, atol 0.25). The harness must report VALUE_MISMATCH on rank 1
only, naming trial 0, output 0 and "1 of N elements"."""

from __future__ import annotations

import torch
import torch.distributed as dist


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    if dist.get_rank(group) == 1:
        out[3] += 1.0
    return out
