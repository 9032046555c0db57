# ParallelKernelBench signature (reference/35_ulysses_all_gather_variable_primitive.py): the ranks'
# x may differ in size along gather_dim (only there); the shapes are exchanged first, then the
# tensors are concatenated in rank order along gather_dim. group None means the default group.
from typing import Optional

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(x: torch.Tensor, gather_dim: int,
             group: Optional[dist.ProcessGroup] = None) -> torch.Tensor:
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    shape = torch.tensor(x.shape, dtype=torch.int64, device=x.device)
    shapes = shape.new_empty(world * x.dim())
    dist.all_gather_into_tensor(shapes, shape, group=group)
    counts = shapes.view(world, x.dim())[:, gather_dim].tolist()
    # Pad every rank's piece to the longest so that one equal-sized gather moves them all.
    front = x.movedim(gather_dim, 0)
    padded = front.new_zeros((max(counts),) + tuple(front.shape[1:]))
    padded[:front.shape[0]] = front
    gathered = padded.new_empty((world * padded.shape[0],) + tuple(padded.shape[1:]))
    dist.all_gather_into_tensor(gathered, padded, group=group)
    pieces = [block[:n] for block, n in zip(gathered.chunk(world), counts)]
    return torch.cat(pieces, dim=0).movedim(0, gather_dim).contiguous()
