# Follows ParallelKernelBench reference/63_deepmd_kalman_filter_optimizer.py: H and the weights
# are lists of (b, 1) blocks, P a list of (b, b); returns every rank's updated weight blocks (in
# rank order, as (b, 1)), this rank's new P list, and the next lambda as a 0-d tensor.
from typing import List

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(H: List[torch.Tensor], error: torch.Tensor, weights: List[torch.Tensor],
             P: List[torch.Tensor], kalman_lambda: float, kalman_nue: float = 0.9987):
    lam = float(kalman_lambda)
    dtype, device = weights[0].dtype, weights[0].device
    gains = [p @ h for p, h in zip(P, H)]
    denominator = torch.stack([(h * k).sum() for h, k in zip(H, gains)]).sum() + lam * len(H)
    dist.all_reduce(denominator)
    scale = (error.to(dtype).reshape(()) / denominator)
    new_weights = [w + scale * k for w, k in zip(weights, gains)]
    new_P = [(p - k @ k.T / denominator) / lam for p, k in zip(P, gains)]
    # Ranks may own different block sizes: share the sizes, gather padded flat buffers.
    sizes = [w.shape[0] for w in new_weights]
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, sizes)
    flat = torch.zeros(max(sum(s) for s in every), dtype=dtype, device=device)
    flat[: sum(sizes)] = torch.cat([w.reshape(-1) for w in new_weights])
    pieces = [torch.empty_like(flat) for _ in every]
    dist.all_gather(pieces, flat)
    gathered = [block.reshape(-1, 1) for piece, s in zip(pieces, every)
                for block in piece[: sum(s)].split(s)]
    next_lambda = torch.tensor(kalman_nue * lam + 1.0 - kalman_nue, dtype=dtype, device=device)
    return gathered, new_P, next_lambda
