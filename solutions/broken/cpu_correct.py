"""Correct (all-reduce, any backend): the reference's own call. The harness must pass it."""

from __future__ import annotations

import torch
import torch.distributed as dist


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out
