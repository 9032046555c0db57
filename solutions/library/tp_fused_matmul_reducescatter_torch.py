"""LIBRARY CODE, a baseline row: problem "tp-fused-matmul-reducescatter" through PyTorch's own
`torch.ops.symm_mem.fused_matmul_reduce_scatter`, the op the problem is modeled on.

PyTorch computes the partial product chunk by chunk in the order the peers need it, writes each
chunk into a symmetric-memory workspace and lets the owner pull it while the next chunk is
multiplied, then reduces the received partials locally
(torch/distributed/_symmetric_memory/__init__.py, _pipelined_produce_and_all2all). The result
is made contiguous because the op returns a view moved back along scatter_dim.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

SCATTER_DIM = 1


def solution(a: torch.Tensor, b: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(group.group_name)
    out = torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", SCATTER_DIM, group.group_name)
    return out.contiguous()
