# ParallelKernelBench signature (reference/8_alltoall.py): equal splits along dim 0.
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    exchanged = torch.empty_like(tensor)
    dist.all_to_all_single(exchanged, tensor.contiguous())
    return exchanged
