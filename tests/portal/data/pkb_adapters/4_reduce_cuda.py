# ParallelKernelBench signature (reference/4_reduce.py): every rank returns its reduce buffer, the
# sum only on dst. Written here with plain torch.distributed.
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor, dst: int = 0) -> torch.Tensor:
    buffer = tensor.clone()
    dist.reduce(buffer, dst=dst, op=dist.ReduceOp.SUM)
    return buffer
