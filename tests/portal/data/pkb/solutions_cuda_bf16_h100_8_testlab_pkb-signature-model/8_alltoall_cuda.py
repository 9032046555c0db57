# ParallelKernelBench signature (reference/8_alltoall.py), deliberately wrong: it returns its own
# input instead of exchanging chunks (the importer accepts it; the evaluator fails it).
import torch


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.clone()
