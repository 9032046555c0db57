# ParallelKernelBench signature (reference/38_ulysses_gather_seq_scatter_heads_qkv.py): the last dim
# is read as [3, proj]; head block r of each of q, k, v goes to rank r and the sequence blocks are
# joined along seq_dim. restore_shape gives [..., 3 * proj / world] back; a set unpadded_dim_size
# that is not a multiple of the world cuts the sequence back to it.
from typing import Optional

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(qkv_tensor: torch.Tensor, seq_dim: int, group: Optional[dist.ProcessGroup] = None,
             unpadded_dim_size: Optional[int] = None, restore_shape: bool = True) -> torch.Tensor:
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    width = qkv_tensor.shape[-1]
    split = qkv_tensor.reshape(*qkv_tensor.shape[:-1], 3, width // 3)
    outgoing = torch.stack(split.chunk(world, dim=-1))
    incoming = torch.empty_like(outgoing)
    dist.all_to_all_single(incoming, outgoing, group=group)
    out = torch.cat(incoming.unbind(0), dim=seq_dim)
    if restore_shape:
        out = out.reshape(*out.shape[:-2], 3 * (width // 3) // world)
    if unpadded_dim_size and unpadded_dim_size % world:
        out = out.narrow(seq_dim, 0, unpadded_dim_size)
    return out
