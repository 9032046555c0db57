"""Allocates and touches 100 GB of host memory (a torch tensor, then a bytearray). Without a memory
limit per rank it would push the host into swap or have the kernel's OOM killer pick a victim,
possibly the evaluator or the database."""

from __future__ import annotations

import torch
import torch.distributed as dist

SIZE = 100 * 10**9


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    try:
        hog = torch.empty(SIZE, dtype=torch.uint8)
        hog.fill_(1)
    except RuntimeError:
        hog = bytearray(SIZE)  # raises MemoryError if this is refused too
        hog[::4096] = b"\x01" * len(range(0, SIZE, 4096))
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
