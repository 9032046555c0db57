# ParallelKernelBench signature (reference/36_ulysses_gather_seq_scatter_heads.py): head block r of
# x goes to rank r and the sequence blocks received are joined in rank order along seq_dim; with
# unpadded_dim_size set and not a multiple of the world, the gathered sequence is cut back to it.
from typing import Optional

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(x: torch.Tensor, seq_dim: int, head_dim: int,
             group: Optional[dist.ProcessGroup] = None, unpadded_dim_size: int = 0) -> torch.Tensor:
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    outgoing = torch.stack(x.chunk(world, dim=head_dim))
    incoming = torch.empty_like(outgoing)
    dist.all_to_all_single(incoming, outgoing, group=group)
    out = torch.cat(incoming.unbind(0), dim=seq_dim)
    if unpadded_dim_size and unpadded_dim_size % world:
        out = out.narrow(seq_dim, 0, unpadded_dim_size)
    return out
