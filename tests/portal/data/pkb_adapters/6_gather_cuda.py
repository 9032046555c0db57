# ParallelKernelBench signature (reference/6_gather.py): dst returns the (world, ...) stack; the
# other ranks return their input tensor itself, which the adapter must not hand back as an output.
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor, dst: int = 0) -> torch.Tensor:
    if dist.get_rank() != dst:
        dist.gather(tensor, gather_list=None, dst=dst)
        return tensor
    stacked = torch.empty((dist.get_world_size(), *tensor.shape), dtype=tensor.dtype, device=tensor.device)
    dist.gather(tensor, gather_list=list(stacked.unbind(0)), dst=dst)
    return stacked
