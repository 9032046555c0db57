"""BROKEN on purpose (all-reduce): computes correctly but deletes the output files the harness
wrote for earlier trials (rank processes run in their side's work folder, outputs in `out/`). On GPUs
the harness must report PROTOCOL_VIOLATION instead of crashing while it judges; on CPU the judge
reads its own copies of the outputs (docs/judge.md), so the deletion changes nothing and it passes."""

from __future__ import annotations

import contextlib
import glob
import os

import torch
import torch.distributed as dist


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    for path in glob.glob(os.path.join("out", "*.pt")):
        with contextlib.suppress(FileNotFoundError):  # its peer may have got there first
            os.remove(path)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
