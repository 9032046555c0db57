"""BROKEN on purpose (all-reduce): Raises on rank 1."""
import torch.distributed as dist


def solution(x, *, group):
    if dist.get_rank(group) == 1:
        raise ValueError("rank 1 cannot handle this shape")
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
