"""Attack (all-reduce): reach up the call stack into the harness and shorten the timed phase (the
old harness read its stop rule from a `cfg` dict a frame above the solution, and its rank 0
decided when to stop): one timed call, then stop. The answer stays right; only the timing is bent."""

import sys

import torch.distributed as dist

KEYS = {"max_iterations": 1, "min_iterations": 1, "min_time_s": 0.0, "max_time_s": 0.0,
        "min_rounds": 1, "max_rounds": 1, "min_block_calls": 1, "max_block_calls": 1}


def _bend() -> None:
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, dict) and "max_iterations" in value:
                value.update(KEYS)
            config = getattr(value, "cfg", None)
            if isinstance(config, dict):
                config.update(KEYS)
        frame = frame.f_back


def solution(x, *, group):
    _bend()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
