"""Distributed optimizer: gradient reduce-scatter, global gradient norm across shards, clipping."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(grad_buffer: torch.Tensor, max_norm: torch.Tensor, *, group: dist.ProcessGroup):
    world = dist.get_world_size(group)
    # DP gradient reduction: each rank keeps the averaged shard its optimizer owns.
    shard = torch.empty(grad_buffer.numel() // world, dtype=grad_buffer.dtype,
                        device=grad_buffer.device)
    dist.reduce_scatter_tensor(shard, grad_buffer * (1.0 / world), op=dist.ReduceOp.SUM,
                               group=group)
    main_grad = shard.float()
    # get_grad_norm_fp32: local sum of squares, summed over the shards of every rank.
    norm_sq = main_grad.square().sum().reshape(1)
    dist.all_reduce(norm_sq, op=dist.ReduceOp.SUM, group=group)
    total_norm = norm_sq.sqrt()
    # clip_grad_by_total_norm_fp32: scale only when the norm exceeds max_norm.
    clip_coeff = torch.clamp(max_norm / (total_norm + 1e-6), max=1.0)
    return main_grad * clip_coeff, total_norm


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n, world = case["numel"], case.world_size
    # O(1) gradients; the averaged gradient's norm is about sqrt(n / world). max_norm (a float
    # in the real code, a tensor here so it can be drawn per seed) is 0.5x-2x that: some seeds
    # clip and some do not, and the outputs stay O(1) at every size.
    max_norm = case.rand(1, stream="max_norm", shared=True, dtype=torch.float32, low=0.5,
                         high=2.0) * (n / world) ** 0.5
    return {"grad_buffer": case.randn(n, stream="g"), "max_norm": max_norm}


def roofline(s: Setting) -> Traffic:
    n, world = s["numel"], s.world_size
    shard = n // world
    return Traffic(link_bytes=traffic.reduce_scatter(n * s.itemsize, world),
                   hbm_bytes=n * s.itemsize + 4 * shard, flops=world * shard + 3 * shard)


PROBLEM = Problem(
    id=209,
    slug="dist-opt-grad-norm-clip",
    title="Distributed-optimizer gradient reduce-scatter with global-norm clipping",
    description=(
        "With Megatron-LM's distributed optimizer (ZeRO-1) every data-parallel rank only owns a "
        "shard of the fp32 main gradients: the gradient buffer is pre-scaled by 1/dp and "
        "reduce-scattered, each rank sums the squares of its shard, the partial sums are "
        "all-reduced to get the global L2 norm, and the shard is multiplied by "
        "min(1, max_norm / (norm + 1e-6)) (max_norm is passed as a one-element tensor). The norm all-reduce cannot start before the whole "
        "shard is reduced and the scaling cannot start before the norm is known, so the step "
        "serialises a 64 MiB reduce-scatter, a reduction pass, a latency-bound all-reduce and a "
        "scaling pass; a fast kernel accumulates the sum of squares while the reduced shard is "
        "produced and applies the coefficient in a single final pass."
    ),
    categories=("data", "fsdp_zero"),
    source=Source("Megatron-LM",
                  "megatron/core/optimizer/clip_grads.py: get_grad_norm_fp32",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("reduce_scatter", "all_reduce"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 4096}, "default": {"numel": 32 * 2**20}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("backward",),
)
