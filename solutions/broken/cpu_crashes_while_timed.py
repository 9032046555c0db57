"""BROKEN on purpose (all-reduce): honest for the correctness trials, then rank 0 dies in the timed
phase. The verdict is a crash of the candidate, never a harness error, and the reference side,
alive and waiting for its next block, is stopped with it."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

_calls = 0


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    global _calls
    _calls += 1
    if _calls > 6 and dist.get_rank() == 0:
        os._exit(3)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
