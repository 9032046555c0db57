# ParallelKernelBench signature (reference/5_scatter.py): the source passes a (world, ...) stack,
# every other rank a tensor of the output's shape, whose contents are overwritten.
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
    if dist.get_rank() != src:
        received = torch.empty_like(tensor)
        dist.scatter(received, scatter_list=None, src=src)
        return received
    pieces = list(tensor.unbind(0))
    received = torch.empty_like(pieces[0])
    dist.scatter(received, scatter_list=[p.contiguous() for p in pieces], src=src)
    return received
