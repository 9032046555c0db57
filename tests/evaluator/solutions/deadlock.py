"""Rank 0 skips the collective its peers wait in."""
import torch.distributed as dist


def solution(x, *, group):
    out = x.clone()
    if dist.get_rank(group) != 0:
        dist.all_reduce(out, group=group)
    return out
