"""SyncBatchNorm backward: local reductions, all-reduce of (sum_dy, sum_dy_xmu), input gradient."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(grad_output: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
              mean: torch.Tensor, invstd: torch.Tensor, *, group: dist.ProcessGroup):
    world = dist.get_world_size(group)
    c = x.shape[1]
    dy = grad_output.float()
    xmu = x.float() - mean.view(1, c, 1, 1)
    # batch_norm_backward_reduce: per-channel sums over this rank's batch.
    sum_dy = dy.sum(dim=(0, 2, 3))
    sum_dy_xmu = (dy * xmu).sum(dim=(0, 2, 3))
    grad_weight = sum_dy_xmu * invstd  # local: DDP averages parameter grads afterwards
    grad_bias = sum_dy.clone()
    combined = torch.cat([sum_dy, sum_dy_xmu])
    dist.all_reduce(combined, op=dist.ReduceOp.SUM, group=group)
    # Every rank holds the same number of elements per channel.
    total = world * (x.numel() // c)
    mean_dy = (combined[:c] / total).view(1, c, 1, 1)
    mean_dy_xmu = (combined[c:] / total).view(1, c, 1, 1)
    inv = invstd.view(1, c, 1, 1)
    # batch_norm_backward_elemt
    grad_input = (dy - mean_dy - xmu * inv * inv * mean_dy_xmu) * (inv * weight.view(1, c, 1, 1))
    return grad_input.to(x.dtype), grad_weight, grad_bias


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n, c, hw = case["batch"], case["channels"], case["spatial"]
    f32 = torch.float32
    return {
        "grad_output": case.randn(n, c, hw, hw, stream="dy"),
        "x": case.randn(n, c, hw, hw, stream="x"),
        "weight": case.rand(c, stream="w", shared=True, dtype=f32, low=0.5, high=1.5),
        # The global statistics saved by the forward pass (identical on every rank).
        "mean": case.randn(c, stream="mean", shared=True, dtype=f32, std=0.1),
        "invstd": case.rand(c, stream="invstd", shared=True, dtype=f32, low=0.8, high=1.25),
    }


def roofline(s: Setting) -> Traffic:
    n, c, hw = s["batch"], s["channels"], s["spatial"]
    act = n * c * hw * hw * s.itemsize
    # Read dy and x for the reductions and again for the elementwise pass; write dx.
    return Traffic(link_bytes=traffic.all_reduce(2 * c * 4, s.world_size), hbm_bytes=5 * act,
                   flops=10 * n * c * hw * hw)


PROBLEM = Problem(
    id=207,
    slug="syncbn-backward",
    title="SyncBatchNorm backward (all-reduce of gradient sums)",
    description=(
        "The backward of torch.nn.SyncBatchNorm: each rank reduces its upstream gradient per "
        "channel into sum(dy) and sum(dy * (x - mean)) (which also give the local weight and "
        "bias gradients), the two vectors are all-reduced across the data-parallel group, and "
        "the input gradient is formed elementwise from the global means of both sums. As in the "
        "forward, the all-reduce is tiny (2 x channels floats) but splits two passes over the "
        "activation and its gradient, so latency and memory passes dominate; a fast kernel "
        "fuses the reductions, exchanges the partial sums directly and finishes the input "
        "gradient without returning to the host."
    ),
    categories=("data",),
    source=Source("PyTorch", "torch/nn/modules/_functions.py: SyncBatchNorm.backward",
                  "https://github.com/pytorch/pytorch"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 2, "channels": 8, "spatial": 6},
           "default": {"batch": 32, "channels": 256, "spatial": 56}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    tags=("backward",),
)
