"""Control for builds_on_first_call.py: the same 3.5 s in the first call, not announced as a build."""

import time

import torch.distributed as dist

_stalled = False


def solution(x, *, group):
    global _stalled
    if not _stalled:
        time.sleep(3.5)
        _stalled = True
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
