# ParallelKernelBench signature (reference/73_vocab_parallel_cross_entropy_loss.py), numbered as
# the generated files number it (74). Like the reference it shifts the logits in place.
from typing import Optional

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(vocab_parallel_logits: torch.Tensor, target: torch.Tensor,
             group: Optional[dist.ProcessGroup] = None) -> torch.Tensor:
    group = group or dist.group.WORLD
    part = vocab_parallel_logits.shape[-1]
    start = dist.get_rank(group=group) * part
    top = vocab_parallel_logits.max(dim=-1).values
    dist.all_reduce(top, op=dist.ReduceOp.MAX, group=group)
    vocab_parallel_logits.sub_(top.unsqueeze(-1))
    outside = (target < start) | (target >= start + part)
    local = (target - start).masked_fill(outside, 0)
    picked = vocab_parallel_logits.gather(-1, local.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
    sums = torch.stack([picked, vocab_parallel_logits.exp().sum(dim=-1)])
    dist.all_reduce(sums, group=group)  # one reduction for both partials
    return torch.log(sums[1]) - sums[0]
