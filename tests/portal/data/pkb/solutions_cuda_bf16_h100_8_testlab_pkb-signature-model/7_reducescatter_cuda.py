# ParallelKernelBench signature (reference/7_reducescatter.py).
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    parts = [c.contiguous() for c in tensor.chunk(world, dim=0)]
    out = torch.empty_like(parts[0])
    dist.reduce_scatter(out, parts)
    return out
