"""BROKEN on purpose (all-reduce): Reduces in place into its input and returns it: the reference leaves x alone."""
import torch.distributed as dist


def solution(x, *, group):
    dist.all_reduce(x, group=group)
    return x
