"""LIBRARY CODE, a baseline row: problem "tp-gemm-reducescatter" (Megatron's row-parallel linear
with sequence parallelism) through PyTorch's `torch.ops.symm_mem.fused_matmul_reduce_scatter`.

The op computes x_parallel @ weight_shard.T chunk by chunk in the order the owners need the
sequence blocks, exchanges the chunks through a symmetric-memory workspace while the next one
is multiplied, and reduces the received partials locally; the bias is added to the reduced
shard afterwards, as the reference does.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def solution(x_parallel: torch.Tensor, weight_shard: torch.Tensor, bias: torch.Tensor, *,
             group: dist.ProcessGroup) -> torch.Tensor:
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(group.group_name)
    shard = torch.ops.symm_mem.fused_matmul_reduce_scatter(
        x_parallel, weight_shard.t(), "sum", 0, group.group_name)
    return shard + bias
