"""BROKEN on purpose (all-reduce): Returns half of the output."""
import torch.distributed as dist


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out[: out.numel() // 2]
