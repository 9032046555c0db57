"""BROKEN on purpose (all-reduce): the kernel spins on a peer flag that nobody ever sets.

Each rank waits for its right neighbour to raise a flag in this rank's symmetric buffer; no
rank raises one, so every rank spins forever on the GPU. NCCL's watchdog never sees it: only
killing the ranks' process group ends it. The harness must report DEADLOCK.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

from evaluator.cuda import compile_kernels

SOURCE = r"""
extern "C" __global__ void wait_for_peer(const volatile unsigned int* flag) {
  while (*flag == 0u) { __nanosleep(1000); }
}
"""

_state: dict = {}


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    if not _state:
        flag = symm_mem.empty(4, dtype=torch.int32, device=x.device)
        flag.zero_()
        _state["flag"] = flag
        _state["handle"] = symm_mem.rendezvous(flag, group.group_name)
        _state["kernel"] = compile_kernels(SOURCE, ["wait_for_peer"])["wait_for_peer"]
    _state["handle"].barrier(channel=0)
    _state["kernel"](_state["flag"], grid=1, block=1)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
