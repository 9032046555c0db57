"""BROKEN on purpose (all-reduce): deadlocks (rank 0 skips the collective) while writing garbage
and fake progress to every open file descriptor, hoping to keep the harness waiting or to forge a
result. The judge must end it within its step limit: lines on the status channel that the harness
never writes are a PROTOCOL_VIOLATION (a deadlock, before the judge refused them)."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def _spam() -> None:
    junk = b'{"event": "done"}\n{"event": "step", "step": "trial 9"}\n' + b"x" * 100_000 + b"\n"
    for fd in range(3, 64):
        try:
            os.write(fd, junk)
        except OSError:
            pass


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    _spam()
    out = x.clone()
    if dist.get_rank(group) != 0:
        dist.all_reduce(out, group=group)
    return out
