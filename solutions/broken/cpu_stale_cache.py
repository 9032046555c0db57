"""BROKEN on purpose (all-reduce): computes honestly for the correctness trials, then returns its
last result without doing the work (a reward hack: fast, and right only for old inputs). The
harness must catch it when it re-checks a timed iteration's output."""

from __future__ import annotations

import torch
import torch.distributed as dist

_calls = 0
_last: torch.Tensor | None = None


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    global _calls, _last
    _calls += 1
    if _last is not None and _calls > 5:
        return _last
    out = x.clone()
    dist.all_reduce(out, group=group)
    _last = out
    return out
