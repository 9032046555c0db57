"""Rank 1 dies without a word in the first call."""
import os

import torch.distributed as dist


def solution(x, *, group):
    if dist.get_rank(group) == 1:
        os.abort()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
