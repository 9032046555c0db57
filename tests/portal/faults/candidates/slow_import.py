"""A correct all-reduce whose import takes 20 seconds: its ranks are alive, and the evaluator
silent, for long enough that a test can kill the worker in the middle of the evaluation and
see whether anything outlives it (a silent evaluator gets no SIGPIPE to end it)."""

import time

import torch.distributed as dist

time.sleep(20)


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
