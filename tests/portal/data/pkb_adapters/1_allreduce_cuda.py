# Written to ParallelKernelBench's signature (reference/1_allreduce.py): default group, one tensor.
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    # Reduce-scatter then all-gather: the same sum in two steps.
    world = dist.get_world_size()
    flat = tensor.reshape(-1)
    pad = (-flat.numel()) % world
    work = torch.cat([flat, flat.new_zeros(pad)]) if pad else flat.clone()
    parts = list(work.chunk(world))
    mine = torch.empty_like(parts[0])
    dist.reduce_scatter(mine, parts)
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    return torch.cat(gathered)[: flat.numel()].reshape(tensor.shape)
