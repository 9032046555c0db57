"""Backward of the sequence-parallel all-gather + column-parallel GEMM (Megatron-LM)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x_shard: torch.Tensor, weight_shard: torch.Tensor, grad_output: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor]:
    # Forward was y = all_gather(x_shard) @ weight_shard.t() (problem tp-allgather-gemm).
    # x_shard: [tokens / tp, hidden]; weight_shard: [out / tp, hidden]; grad_output: [tokens, out / tp].
    world = dist.get_world_size(group)
    # Megatron saves only the shard and re-gathers the input for the weight gradient.
    x_full = torch.empty((x_shard.shape[0] * world, x_shard.shape[1]),
                         dtype=x_shard.dtype, device=x_shard.device)
    dist.all_gather_into_tensor(x_full, x_shard, group=group)
    # The data gradient is a partial sum over this rank's output columns; reduce it and scatter
    # the sequence back to its owners.
    grad_input = grad_output.matmul(weight_shard)
    grad_input_shard = torch.empty_like(x_shard)
    dist.reduce_scatter_tensor(grad_input_shard, grad_input, group=group)
    grad_weight = grad_output.t().matmul(x_full)
    return grad_input_shard, grad_weight


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    tokens, hidden, out = case["tokens"], case["hidden"], case["out_features"]
    n = case.world_size
    return {
        "x_shard": case.randn(tokens // n, hidden, stream="x", std=tokens ** -0.5),
        "weight_shard": case.randn(out // n, hidden, stream="w", std=out ** -0.5),
        "grad_output": case.randn(tokens, out // n, stream="dy"),
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    tokens, hidden, out_per_rank = s["tokens"], s["hidden"], s["out_features"] // n
    x_bytes = tokens * hidden * e
    w_bytes = out_per_rank * hidden * e
    dy_bytes = tokens * out_per_rank * e
    # The all-gather and the reduce-scatter move data in opposite directions, but each link
    # direction carries (n-1)/n of a full activation for each of them.
    link = traffic.all_gather(x_bytes, n) + traffic.reduce_scatter(x_bytes, n)
    hbm = x_bytes / n + w_bytes + dy_bytes + x_bytes / n + w_bytes
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=4 * tokens * hidden * out_per_rank)


PROBLEM = Problem(
    id=406,
    slug="tp-allgather-gemm-backward",
    title="Backward of sequence-parallel all-gather + GEMM (re-gather, reduce-scatter)",
    description=(
        "The backward pass of Megatron-LM's column-parallel linear under sequence parallelism "
        "needs two collectives: the saved input shard is all-gathered again along the sequence "
        "(to avoid keeping the full activation in memory) for the weight gradient "
        "grad_output^T @ x, and the data gradient grad_output @ W_shard, a partial sum over this "
        "rank's output columns, is reduce-scattered so each rank gets the summed gradient of its "
        "own tokens. Megatron overlaps the gather with the data-gradient GEMM and the "
        "reduce-scatter with the weight-gradient GEMM. Both collectives carry a full activation "
        "(64-256 MiB) per QKV and fc1 layer. A fast kernel chunks the GEMMs along the sequence so "
        "each gathered chunk is consumed as it lands and each data-gradient chunk is sent to its "
        "owner as soon as it is computed."
    ),
    categories=("tensor", "sequence"),
    source=Source(
        "Megatron-LM",
        "megatron/core/tensor_parallel/layers.py: "
        "LinearWithGradAccumulationAndAsyncCommunication.backward (sequence_parallel)",
        "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_gather", "reduce_scatter"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 32, "hidden": 48, "out_features": 64},
           "default": {"tokens": 8192, "hidden": 8192, "out_features": 8192}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    tags=("backward",),
)
