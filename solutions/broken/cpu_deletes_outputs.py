"""BROKEN on purpose (all-reduce): computes correctly but deletes the output files the harness
wrote for earlier trials (rank processes run inside the evaluation's work folder). The harness
must report PROTOCOL_VIOLATION instead of crashing while it judges."""

from __future__ import annotations

import contextlib
import glob
import os

import torch
import torch.distributed as dist


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    for path in glob.glob(os.path.join("candidate", "*.pt")):
        with contextlib.suppress(FileNotFoundError):  # its peer may have got there first
            os.remove(path)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
