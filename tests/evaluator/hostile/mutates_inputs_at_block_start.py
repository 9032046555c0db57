"""Attack (all-reduce), class 6 with the judge's ring of input regions: reduce in place into the
input only in the first call of each timed block (the first call after the side stood frozen),
once the short warm-up blocks are over, elsewhere honestly. Its region is written again by the judge a few calls later, before the block
ends: a judge that compared inputs only after the block, only in the regions still holding their
call's inputs, would never see it."""

import time

import torch.distributed as dist

TRIALS = 2
GAP_S = 0.015  # the side stood frozen while the other side ran its block: the longest pause
WARM_UP_CALLS = 60  # warm-up blocks are a call or two: all of them are checked after the block
_calls = 0
_last = None


def solution(x, *, group):
    global _calls, _last
    _calls += 1
    now = time.monotonic()
    block_start = _last is not None and now - _last > GAP_S
    _last = now
    if _calls > TRIALS + WARM_UP_CALLS and block_start:
        dist.all_reduce(x, group=group)
        return x
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
