"""End-to-end ZeRO-2 training step: gradients reduce-scattered, optimizer state sharded."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.fsdp_zero.zero_training_step import zero_problem, zero_step


def reference(x: torch.Tensor, y: torch.Tensor, params: torch.Tensor, exp_avg: torch.Tensor,
              exp_avg_sq: torch.Tensor, hidden: int, step: int, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return zero_step(x, y, params, exp_avg, exp_avg_sq, hidden, step, group, stage=2)


PROBLEM = zero_problem(2, 316, 42, reference,
                       "reduce-scatters the gradient so that it receives only the sum for its slice")
