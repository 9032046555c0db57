# Mapped (in the tests) to a problem no adapter converts yet.
import torch


def solution(tensor: torch.Tensor, scatter_dim: int, gather_dim: int) -> torch.Tensor:
    return tensor
