"""A PKB-style candidate (all-reduce): its "build" happens inside the first solution() call and
takes longer than one step may. Announced as a build, it is held to the build limit instead."""

import time

import torch.distributed as dist

from evaluator.builds import building


def _compile_for(seconds: float) -> None:
    """Busy for ``seconds``, as a compiler is (a sleeping "build" is held to the step limit)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(10000))

_built = False


def solution(x, *, group):
    global _built
    if not _built:
        with building("a slow nvcc run"):
            _compile_for(3.5)
        _built = True
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
