"""BROKEN on purpose (all-reduce): the arguments are misnamed (the harness passes x= and group=).
The harness must report SIGNATURE_MISMATCH before running anything."""

from __future__ import annotations

import torch
import torch.distributed as dist


def solution(tensor: torch.Tensor, *, process_group: dist.ProcessGroup) -> torch.Tensor:
    out = tensor.clone()
    dist.all_reduce(out, group=process_group)
    return out
