"""LIBRARY CODE, a baseline row: problem "tp-fused-allgather-matmul" through PyTorch's own
`torch.ops.symm_mem.fused_all_gather_matmul`, the op the problem is modeled on.

PyTorch copies the peers' shards out of a symmetric-memory workspace with the copy engines,
two streams alternating, and multiplies each shard as soon as it has landed, so the gather
hides behind the GEMMs (torch/distributed/_symmetric_memory/__init__.py,
_pipelined_multi_all_gather_and_consume). It returns the gathered A and [A @ B for B in Bs],
exactly the problem's outputs; they are made contiguous because the op returns views moved back
along gather_dim.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

GATHER_DIM = 1


def solution(a_shard: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, *,
             group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(group.group_name)
    a_full, (gate, up) = torch.ops.symm_mem.fused_all_gather_matmul(
        a_shard, [b_gate, b_up], GATHER_DIM, group.group_name)
    return a_full.contiguous(), gate.contiguous(), up.contiguous()
