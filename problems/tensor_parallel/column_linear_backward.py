"""Backward of a column-parallel linear layer: data-gradient all-reduce overlapped with the weight gradient."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, weight_shard: torch.Tensor, grad_output: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # Forward was y_shard = x @ weight_shard.t() with x replicated on every TP rank.
    # x: [tokens, hidden]; weight_shard: [out / tp, hidden]; grad_output: [tokens, out / tp].
    grad_input = grad_output.matmul(weight_shard)  # partial over the output columns of this rank
    # Megatron launches this all-reduce asynchronously and computes the weight gradient meanwhile.
    dist.all_reduce(grad_input, op=dist.ReduceOp.SUM, group=group)
    grad_weight = grad_output.t().matmul(x)
    grad_bias = grad_output.sum(dim=0)
    return grad_input, grad_weight, grad_bias


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    tokens, hidden, out = case["tokens"], case["hidden"], case["out_features"]
    out_per_rank = out // case.world_size
    return {
        # Scaled so that every output is O(1): the weight gradient sums over all tokens.
        "x": case.randn(tokens, hidden, stream="x", shared=True, std=tokens ** -0.5),
        "weight_shard": case.randn(out_per_rank, hidden, stream="w", std=out ** -0.5),
        "grad_output": case.randn(tokens, out_per_rank, stream="dy"),
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    tokens, hidden, out_per_rank = s["tokens"], s["hidden"], s["out_features"] // n
    x_bytes = tokens * hidden * e
    w_bytes = out_per_rank * hidden * e
    dy_bytes = tokens * out_per_rank * e
    # Reads x, weight and grad_output once; writes grad_input, grad_weight and grad_bias.
    hbm = x_bytes + w_bytes + dy_bytes + x_bytes + w_bytes + out_per_rank * e
    return Traffic(link_bytes=traffic.all_reduce(x_bytes, n), hbm_bytes=hbm,
                   flops=4 * tokens * hidden * out_per_rank + tokens * out_per_rank)


PROBLEM = Problem(
    id=405,
    slug="tp-column-linear-backward",
    title="Column-parallel linear backward (grad-input all-reduce + weight grad)",
    description=(
        "In the backward pass of Megatron-LM's ColumnParallelLinear without sequence parallelism, "
        "each tensor-parallel rank holds the gradient for its block of output columns. The input "
        "gradient grad_output @ W_shard is only a partial sum over those columns, so it is "
        "all-reduced across the TP group; Megatron starts that all-reduce asynchronously and "
        "computes the weight gradient grad_output^T @ x (and the bias gradient) while it is in "
        "flight. The all-reduced tensor is a full [tokens, hidden] activation gradient, tens to "
        "hundreds of MiB, once per QKV and up/gate projection per layer. A fast implementation "
        "overlaps the reduction with the weight-gradient GEMM at tile granularity, or splits the "
        "data-gradient GEMM so the first chunks are already being reduced while later ones compute."
    ),
    categories=("tensor",),
    source=Source(
        "Megatron-LM",
        "megatron/core/tensor_parallel/layers.py: "
        "LinearWithGradAccumulationAndAsyncCommunication.backward (allreduce_dgrad)",
        "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 32, "hidden": 48, "out_features": 64},
           "default": {"tokens": 8192, "hidden": 8192, "out_features": 8192}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    tags=("backward",),
)
