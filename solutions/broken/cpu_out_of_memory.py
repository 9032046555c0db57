"""BROKEN on purpose (all-reduce): asks for far more host memory than exists. The harness must
report RESOURCE_LIMIT naming the sandbox's memory limit (OUT_OF_MEMORY with the sandbox off), not a
generic runtime error."""

from __future__ import annotations

import torch
import torch.distributed as dist


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    scratch = torch.empty(2**48, dtype=torch.float32, device=x.device)  # 1 PiB
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out + scratch[:0].sum()
