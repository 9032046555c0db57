"""BROKEN on purpose (all-reduce): honest for the correctness trials, then rank 1 stops answering in
the timed phase (a hang that only a timing run meets). The parent's deadline for the timed block
must end it as a deadlock, with stacks, although the reference side is alive and waiting."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

_calls = 0


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    global _calls
    _calls += 1
    if _calls > 6 and dist.get_rank() == 1:
        time.sleep(3600)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
