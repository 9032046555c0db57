"""All-reduce: builds for a second on rank 0 during the first call, then that call raises. The
report still says how long the build took."""

import time

import torch.distributed as dist

from evaluator.builds import building


def solution(x, *, group):
    if dist.get_rank(group) == 0:
        with building("a build that works"):
            time.sleep(1.0)
    raise RuntimeError("the kernel launch failed after the build")
