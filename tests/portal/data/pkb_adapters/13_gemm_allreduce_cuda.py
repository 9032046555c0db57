# ParallelKernelBench signature (reference/13_gemm_allreduce.py): A (M, K/tp) @ B (K/tp, N), the
# partial products all-reduced; no bias (the adapter adds ours).
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(A_local: torch.Tensor, B_local: torch.Tensor) -> torch.Tensor:
    product = A_local @ B_local
    dist.all_reduce(product)
    return product
