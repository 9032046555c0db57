"""Right everywhere except one element on rank 1."""
import torch.distributed as dist


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    if dist.get_rank(group) == 1:
        out[3] += 0.25
    return out
