"""Correct: the same collective the reference uses."""
import torch.distributed as dist


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
