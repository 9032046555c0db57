"""An end-to-end DDP training step: local forward/backward, gradient all-reduce, AdamW."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.training_step import STEP_SIZES, adamw, mlp_grads, param_count, step_flops


def reference(x: torch.Tensor, y: torch.Tensor, params: torch.Tensor, exp_avg: torch.Tensor,
              exp_avg_sq: torch.Tensor, hidden: int, step: int, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # x [b, d_in], y [b, d_out]: this rank's micro-batch. params, exp_avg, exp_avg_sq: the flat
    # parameters (W1, b1, W2, b2) and Adam moments (float32, or bfloat16 as ParallelKernelBench
    # runs it), replicated on every rank.
    # Returns the updated parameters and moments, identical on every rank.
    grad = mlp_grads(x, y, params, hidden)
    # DistributedDataParallel's reducer: sum the gradients over ranks, divide by the world.
    dist.all_reduce(grad, group=group)
    grad /= dist.get_world_size(group)
    return adamw(params, grad, exp_avg, exp_avg_sq, step)


def make_inputs(case: Case) -> dict[str, object]:
    d_in, hidden, d_out, b = case["d_in"], case["hidden"], case["d_out"], case["batch"]
    n = param_count(d_in, hidden, d_out)
    return {"x": case.randn(b, d_in, stream="x"),
            "y": case.randn(b, d_out, stream="y"),
            "params": case.randn(n, stream="params", shared=True, std=d_in ** -0.5),
            "exp_avg": case.randn(n, stream="m", shared=True, std=1e-3),
            "exp_avg_sq": case.rand(n, stream="v", shared=True, low=1e-6, high=1e-4),
            "hidden": hidden, "step": case["step"]}


def roofline(s: Setting) -> Traffic:
    n = param_count(s["d_in"], s["hidden"], s["d_out"])
    grad_bytes = n * s.itemsize
    # Read the weights twice (forward, backward), write and read the gradient, read and write
    # parameters and both moments; activations are small beside them.
    return Traffic(link_bytes=traffic.all_reduce(grad_bytes, s.world_size),
                   hbm_bytes=2 * grad_bytes + 2 * grad_bytes + 6 * grad_bytes,
                   flops=step_flops(s["batch"], n) + 16 * n)


PROBLEM = Problem(
    id=211,
    slug="ddp-training-step",
    title="End-to-end DDP training step (forward, backward, all-reduce, AdamW)",
    description=(
        "A whole data-parallel training step as PyTorch DistributedDataParallel runs it: every "
        "rank holds the full model and optimizer state, runs forward and backward on its own "
        "micro-batch (here a two-layer MLP with an MSE loss), the reducer all-reduces the "
        "gradients and divides by the world size, and every rank applies the same AdamW "
        "update. The gradient all-reduce moves the whole model's gradients each step; the "
        "real reducer overlaps it bucket by bucket with the rest of the backward, and a fast "
        "version goes further, fusing the average into the optimizer and overlapping the "
        "reduction of the second layer's gradients with the first layer's backward GEMMs."
    ),
    categories=("data",),
    source=Source("PyTorch", "torch/nn/parallel/distributed.py: DistributedDataParallel "
                  "(Reducer all-reduce of gradient buckets) with torch/optim/adamw.py: adamw",
                  "https://github.com/pytorch/pytorch"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes=STEP_SIZES,
    tolerances=tolerances(float32=(1e-5, 1e-5), bfloat16=(2e-2, 2e-2)),
    traffic=roofline,
    dtypes=(torch.float32, torch.bfloat16),
    tags=("end-to-end", "optimizer", "backward"),
    pkb_ids=(40,),
)
