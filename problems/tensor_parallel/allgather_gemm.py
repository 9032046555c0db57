"""Sequence-parallel all-gather followed by a column-parallel GEMM (Megatron-LM TP linear)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.sweeps import gemm_tokens


def reference(x_shard: torch.Tensor, weight_shard: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    world = dist.get_world_size(group)
    x_full = torch.empty((x_shard.shape[0] * world, x_shard.shape[1]),
                         dtype=x_shard.dtype, device=x_shard.device)
    dist.all_gather_into_tensor(x_full, x_shard, group=group)
    return x_full @ weight_shard.t()


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    tokens_per_rank = case["tokens"] // case.world_size
    out_per_rank = case["out_features"] // case.world_size
    hidden = case["hidden"]
    return {
        "x_shard": case.randn(tokens_per_rank, hidden, stream="x"),
        "weight_shard": case.randn(out_per_rank, hidden, stream="w", std=hidden ** -0.5),
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden = s.world_size, s["tokens"], s["hidden"]
    out_per_rank = s["out_features"] // n
    x_bytes = tokens * hidden * s.itemsize
    w_bytes = out_per_rank * hidden * s.itemsize
    y_bytes = tokens * out_per_rank * s.itemsize
    return Traffic(link_bytes=traffic.all_gather(x_bytes, n),
                   hbm_bytes=x_bytes + w_bytes + y_bytes,
                   flops=2 * tokens * hidden * out_per_rank)


PROBLEM = Problem(
    id=401,
    slug="tp-allgather-gemm",
    title="Tensor-parallel all-gather + GEMM (column-parallel linear)",
    description=(
        "With sequence parallelism, each tensor-parallel rank holds a slice of the tokens; "
        "before a column-parallel linear layer the activations are all-gathered along the "
        "sequence and multiplied by the rank's column shard of the weight. The gather sits on "
        "the critical path of every transformer layer, so the fast kernels overlap it with the "
        "GEMM chunk by chunk as the peers' slices arrive."
    ),
    categories=("tensor", "sequence"),
    source=Source(
        "Megatron-LM",
        "megatron/core/tensor_parallel/layers.py: LinearWithGradAccumulationAndAsyncCommunication.forward",
        "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 64, "hidden": 48, "out_features": 64},
           "default": {"tokens": 8192, "hidden": 8192, "out_features": 8192}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    sweep=gemm_tokens("all_gather", param="tokens", row_bytes="hidden"),
)
