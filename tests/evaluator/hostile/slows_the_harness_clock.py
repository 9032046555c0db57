"""Attack (all-reduce): make the harness's clock run slow. The rank times each call with a clock
it bound at import, but the name is a module attribute candidate code can rebind: here every
reading is scaled by 1/20, so each call reports a twentieth of its time. The parent's own wall
clock around each block is what gives it away."""

import time

import torch.distributed as dist

from evaluator import rank_runner

_real = time.perf_counter
_origin = _real()
rank_runner._perf_counter = lambda: _origin + (_real() - _origin) / 20


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
