# ParallelKernelBench signature (reference/14_gemm_allgather.py; its model outputs are named
# gemm_allscatter): A (M, K), the same on every rank, times this rank's column block B (K, N/P),
# and the (M, N/P) products joined along the columns in rank order, on the default group.
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    product = A @ B
    stacked = product.new_empty((world * product.shape[0], product.shape[1]))
    dist.all_gather_into_tensor(stacked, product.contiguous())
    return torch.cat(stacked.chunk(world), dim=1)
