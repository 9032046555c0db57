"""Attack (all-reduce), class 6: reduce in place into the input, saving a copy, but only in timed
calls: the in-rank judge compared inputs before and after trials alone."""

import torch.distributed as dist

TRIALS = 2
_calls = 0


def solution(x, *, group):
    global _calls
    _calls += 1
    if _calls <= TRIALS:
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out
    dist.all_reduce(x, group=group)
    return x
