"""CUDA-event timing shared by the probe and the GPU check scripts."""

from __future__ import annotations

import statistics
from typing import Any, Callable

import torch
import torch.distributed as dist


def cuda_median_ms(fn: Callable[[], Any], warmup: int, iters: int, *, align: bool = False) -> float:
    """Median of ``iters`` back-to-back calls, each between two CUDA events, after ``warmup``.

    ``align`` adds a process-group barrier before the timed calls, so that ranks start together.
    """
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    if align:
        dist.barrier()
        torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(iters)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)
