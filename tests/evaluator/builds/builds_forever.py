"""All-reduce: rank 1's build never ends; rank 0 waits for it at the collective."""

import time

import torch.distributed as dist

from evaluator.builds import building


def _compile_for(seconds: float) -> None:
    """Busy for ``seconds``, as a compiler is (a sleeping "build" is held to the step limit)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(10000))


def solution(x, *, group):
    if dist.get_rank(group) == 1:
        with building("a build that hangs"):
            _compile_for(3600)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
