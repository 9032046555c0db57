# A ParallelKittens file: ThunderKittens' runtime and multicast parallel tensors.
import torch

from utils.parallelkittens_runtime import get_or_create_parallel_tensor


def solution(tensor: torch.Tensor) -> torch.Tensor:
    return tensor
