"""Not an attack: a correct all-reduce that takes 2 s per call, so that five trials outlast a
short deadline while every single step stays well inside the step limit."""

import time

import torch.distributed as dist


def solution(x, *, group):
    time.sleep(2)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
