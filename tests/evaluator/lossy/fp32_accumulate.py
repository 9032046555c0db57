"""Honest (all-reduce): sums in float32, rounds once to bf16. Must pass at every world size."""

import torch
import torch.distributed as dist


def solution(x, *, group):
    total = x.float()
    dist.all_reduce(total, group=group)
    return total.to(x.dtype)
