# Follows ParallelKernelBench reference/87_conv2d_boundary_exchange.py: x is split along height
# in rank order; `padding` rows come from each neighbour (zeros at the global edges) and the
# local conv pads only the width.
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F


@torch.no_grad()
def solution(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: int = 1,
             padding: int = 1, group: Optional[dist.ProcessGroup] = None) -> torch.Tensor:
    group = group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    rows = int(padding)
    if rows == 0 or world == 1:
        return F.conv2d(x, weight, bias, stride=stride, padding=padding)
    above = torch.zeros_like(x[:, :, :rows])
    below = torch.zeros_like(x[:, :, -rows:])
    ops = []
    if rank > 0:
        peer = dist.get_global_rank(group, rank - 1)
        ops += [dist.P2POp(dist.isend, x[:, :, :rows].contiguous(), peer, group=group),
                dist.P2POp(dist.irecv, above, peer, group=group)]
    if rank < world - 1:
        peer = dist.get_global_rank(group, rank + 1)
        ops += [dist.P2POp(dist.isend, x[:, :, -rows:].contiguous(), peer, group=group),
                dist.P2POp(dist.irecv, below, peer, group=group)]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    return F.conv2d(torch.cat([above, x, below], dim=2), weight, bias, stride=stride,
                    padding=(0, rows))
