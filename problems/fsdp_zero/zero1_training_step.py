"""End-to-end ZeRO-1 training step: gradients all-reduced, optimizer state sharded."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.fsdp_zero.zero_training_step import zero_problem, zero_step


def reference(x: torch.Tensor, y: torch.Tensor, params: torch.Tensor, exp_avg: torch.Tensor,
              exp_avg_sq: torch.Tensor, hidden: int, step: int, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return zero_step(x, y, params, exp_avg, exp_avg_sq, hidden, step, group, stage=1)


PROBLEM = zero_problem(1, 315, 41, reference,
                       "all-reduces the whole gradient and keeps the slice that matches its moments")
