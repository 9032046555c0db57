"""BROKEN on purpose (all-reduce): answers before its GPU work is done, and does extra work after.

A correct NCCL all-reduce, but the harness's synchronize in this rank is replaced by nothing, so
the rank tells the judge it finished as soon as the work is queued; each call also queues about
a millisecond of matmuls on a side stream that nobody waits for. A judge that trusts the rank's
answer would time only the launches (a speedup far above 1) and let the leftover work run into
the other side's time. The judge outside stops the candidate's clock only once its GPUs are
quiet (evaluator/judge/quiet.py): the verdict is a pass with a speedup below 1, never above.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

_state: dict = {}


def _no_synchronize(*_args: object, **_kwargs: object) -> None:
    return None


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    if not _state:
        try:
            from evaluator import rank_runner

            rank_runner.synchronize = _no_synchronize  # the shim looks it up at call time
        except ImportError:
            pass
        _state["a"] = torch.randn(2048, 2048, device=x.device, dtype=torch.bfloat16)
        _state["stream"] = torch.cuda.Stream(device=x.device)
    out = x.clone()
    dist.all_reduce(out, group=group)
    with torch.cuda.stream(_state["stream"]):
        a = _state["a"]
        for _ in range(40):
            a = a @ _state["a"] * 1e-3
    return out
