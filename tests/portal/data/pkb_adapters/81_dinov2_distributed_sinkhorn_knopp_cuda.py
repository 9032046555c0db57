# Follows ParallelKernelBench reference/80_dinov2_distributed_sinkhorn_knopp.py: teacher scores
# [patches, prototypes] per rank (patch counts may differ); the batch in the normalisation is the
# all-reduced n_masked_patches_tensor. Returns the assignments [patches, prototypes], float32.
from typing import Optional

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(teacher_output: torch.Tensor, teacher_temp: float,
             n_masked_patches_tensor: torch.Tensor, n_iterations: int = 3,
             group: Optional[dist.ProcessGroup] = None) -> torch.Tensor:
    group = group or dist.group.WORLD
    assignment = torch.exp(teacher_output.float() / teacher_temp)  # [patches, prototypes]
    patches = n_masked_patches_tensor.float().reshape(1)
    dist.all_reduce(patches, group=group)
    mass = assignment.sum().reshape(1)
    dist.all_reduce(mass, group=group)
    assignment /= mass
    for _ in range(n_iterations):
        per_prototype = assignment.sum(dim=0, keepdim=True)
        dist.all_reduce(per_prototype, group=group)
        assignment /= per_prototype * assignment.shape[1]
        assignment /= assignment.sum(dim=1, keepdim=True) * patches
    return assignment * patches
