# Generated numbering: 72 is reference 71 (hyena_conv1d_boundary_exchange), which no problem maps.
import torch


def solution(x: torch.Tensor) -> torch.Tensor:
    return x.clone()
