"""LIBRARY CODE, a baseline row: problem "tp-allgather-gemm" (Megatron's column-parallel linear
after a sequence-parallel all-gather) through PyTorch's `torch.ops.symm_mem.fused_all_gather_matmul`.

The op gathers x_shard along dim 0 through a symmetric-memory workspace with the copy engines
and multiplies each shard by weight_shard.T as soon as it lands (the weight is passed as a
transposed view, which matmul takes without a copy). The gathered x it also returns is dropped.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def solution(x_shard: torch.Tensor, weight_shard: torch.Tensor, *,
             group: dist.ProcessGroup) -> torch.Tensor:
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(group.group_name)
    _, (y,) = torch.ops.symm_mem.fused_all_gather_matmul(
        x_shard, [weight_shard.t()], 0, group.group_name)
    return y.contiguous()
