"""Gradient clipping with sharded gradients: each rank's squared norm of its gradient shards is
all-reduced into the global L2 norm, and every shard is scaled by max_norm / norm when that is
below 1 (Megatron-LM get_grad_norm_fp32 + clip_grad_by_total_norm_fp32 under the distributed
optimizer)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(grad_attn: torch.Tensor, grad_mlp: torch.Tensor, grad_embed: torch.Tensor,
              grad_norms: torch.Tensor, max_norm: float, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, ...]:
    grads = [grad_attn, grad_mlp, grad_embed, grad_norms]
    # Local sum of squares over every shard this rank owns, then one all-reduce (SUM).
    local = torch.zeros(1, dtype=torch.float32, device=grad_attn.device)
    for g in grads:
        local += torch.linalg.vector_norm(g, 2.0) ** 2
    dist.all_reduce(local, op=dist.ReduceOp.SUM, group=group)
    total_norm = local.sqrt()
    # Megatron reads the norm on the host and scales only when clipping is needed.
    clip_coeff = max_norm / (total_norm.item() + 1.0e-6)
    if clip_coeff < 1.0:
        for g in grads:
            g.mul_(clip_coeff)
    return (*grads, total_norm)


def make_inputs(case: Case) -> dict[str, object]:
    n = case["numel"] // case.world_size
    # Shards of the fp32 main gradients owned by this rank: the flat shard of a few buckets.
    return {
        "grad_attn": case.randn(n // 4, stream="attn", dtype=torch.float32, std=0.05),
        "grad_mlp": case.randn(n // 2, stream="mlp", dtype=torch.float32, std=0.05),
        "grad_embed": case.randn(n // 4, stream="embed", dtype=torch.float32, std=0.05),
        "grad_norms": case.randn(1024, stream="norms", dtype=torch.float32, std=0.05),
        "max_norm": 1.0,
    }


def roofline(s: Setting) -> Traffic:
    nbytes = 4 * (s["numel"] / s.world_size + 1024)
    # The scale depends on the global norm, so the shards are read twice and written once.
    return Traffic(link_bytes=traffic.all_reduce(4, s.world_size), hbm_bytes=3 * nbytes,
                   flops=3 * s["numel"] / s.world_size)


PROBLEM = Problem(
    id=308,
    slug="sharded-grad-clip",
    title="Global-norm gradient clipping over sharded fp32 gradients",
    description=(
        "With Megatron-LM's distributed optimizer (and likewise FSDP2's clip_grad_norm_ on "
        "sharded DTensor gradients) each rank holds only its shard of the fp32 main gradients. "
        "get_grad_norm_fp32 takes the squared L2 norm of the local shards, all-reduces that one "
        "number over the data-parallel (and model-parallel) group and takes the root; "
        "clip_grad_by_total_norm_fp32 then multiplies every shard by max_norm / (norm + 1e-6) "
        "when that is below one. The all-reduce is only 4 bytes but it sits between two full "
        "passes over hundreds of MiB of gradients right before the optimizer step, and the host "
        "read of the norm stalls the stream; a fast kernel fuses the square-sum into one pass, "
        "does the tiny cross-GPU sum with a device-side flag instead of a host round trip, and "
        "scales without leaving the GPU. fp32 only: the main gradients are fp32 in the real code."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("Megatron-LM",
                  "megatron/core/optimizer/clip_grads.py: get_grad_norm_fp32, clip_grad_by_total_norm_fp32",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 16384}, "default": {"numel": 256 * 2**20}},
    dtypes=(torch.float32,),
    tolerances=tolerances(float32=(1e-6, 1e-4)),
    traffic=roofline,
    may_overwrite=("grad_attn", "grad_mlp", "grad_embed", "grad_norms"),
)
