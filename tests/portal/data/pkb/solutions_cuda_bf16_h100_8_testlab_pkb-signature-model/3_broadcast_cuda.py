# ParallelKernelBench signature (reference/3_broadcast.py). Like several generated files it would
# take an NVLink multicast path when a multicast pointer exists (`hdl.multicast_ptr`) and falls
# back without one: the importer notes the multicast use and still evaluates it.
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
    out = tensor.clone() if dist.get_rank() == src else torch.empty_like(tensor)
    dist.broadcast(out, src=src)
    return out
