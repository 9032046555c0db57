"""Loss-scaled fp16 gradients: reduce-scatter, unscale, global inf/NaN check, skippable Adam step."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

LR, BETA1, BETA2, EPS, STEP = 1e-4, 0.9, 0.95, 1e-8, 10
GROWTH_INTERVAL, GROWTH, BACKOFF, HYSTERESIS, MIN_SCALE = 1000, 2.0, 0.5, 2, 1.0


def reference(grad_buffer: torch.Tensor, main_param: torch.Tensor, exp_avg: torch.Tensor,
              exp_avg_sq: torch.Tensor, loss_scale: torch.Tensor, growth_tracker: torch.Tensor,
              hysteresis_tracker: torch.Tensor, *, group: dist.ProcessGroup):
    world = dist.get_world_size(group)
    # 1. Data-parallel gradient reduction of the fp16 grad buffer, pre-scaled by 1/dp.
    shard = torch.empty(grad_buffer.numel() // world, dtype=grad_buffer.dtype,
                        device=grad_buffer.device)
    dist.reduce_scatter_tensor(shard, grad_buffer * (1.0 / world), op=dist.ReduceOp.SUM,
                               group=group)
    # 2. Copy this rank's shard into fp32 main grads, unscale, look for inf/NaN.
    grad = shard.float().mul_(1.0 / loss_scale)
    found_inf = (~torch.isfinite(grad)).any().float().reshape(1)
    # 3. Every rank must agree to skip the step: MAX over the shards' flags.
    dist.all_reduce(found_inf, op=dist.ReduceOp.MAX, group=group)
    skip = found_inf > 0
    # 4. Adam on the owned shard of the fp32 master weights, unless some shard overflowed.
    grad = torch.where(skip, torch.zeros_like(grad), grad)
    m = exp_avg * BETA1 + grad * (1 - BETA1)
    v = exp_avg_sq * BETA2 + grad * grad * (1 - BETA2)
    denom = (v / (1 - BETA2 ** STEP)).sqrt_().add_(EPS)
    new_param = main_param - (LR / (1 - BETA1 ** STEP)) * m / denom
    new_param = torch.where(skip, main_param, new_param)
    m = torch.where(skip, exp_avg, m)
    v = torch.where(skip, exp_avg_sq, v)
    # 5. Dynamic loss scaler with hysteresis (backoff after `hysteresis` overflows).
    hyst = torch.where(skip, hysteresis_tracker - 1, hysteresis_tracker)
    growth = torch.where(skip, torch.zeros_like(growth_tracker), growth_tracker + 1)
    grow = growth >= GROWTH_INTERVAL
    scale = torch.where(skip & (hyst <= 0), torch.clamp(loss_scale * BACKOFF, min=MIN_SCALE),
                        torch.where(grow, loss_scale * GROWTH, loss_scale))
    growth = torch.where(grow, torch.zeros_like(growth), growth)
    hyst = torch.where(grow, torch.full_like(hyst, HYSTERESIS), hyst)
    return new_param, m, v, found_inf, scale, growth, hyst


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n, world = case["numel"], case.world_size
    shard = n // world
    scale = 2.0 ** case.randint(10, 17, 1, stream="scale", shared=True).float()
    # Scaled gradients (|g| ~ scale * 1e-3); each rank overflows with probability 0.2: one
    # element becomes +inf, so some seeds take the skip path and others the update path.
    grads = case.randn(shard * world, stream="grad", dtype=torch.float32) * (scale * 1e-3)
    overflow = case.rand(1, stream="overflow", dtype=torch.float32) < 0.2
    pos = case.randint(0, shard * world, 1, stream="pos")
    grads[pos] = torch.where(overflow, torch.full_like(grads[pos], math.inf), grads[pos])
    return {
        "grad_buffer": grads.to(torch.float16),
        "main_param": case.randn(shard, stream="param", dtype=torch.float32, std=0.02),
        "exp_avg": case.randn(shard, stream="m", dtype=torch.float32, std=1e-3),
        "exp_avg_sq": case.rand(shard, stream="v", dtype=torch.float32, high=1e-6),
        "loss_scale": scale,
        "growth_tracker": case.randint(GROWTH_INTERVAL - 3, GROWTH_INTERVAL, 1, stream="gt",
                                       shared=True),
        "hysteresis_tracker": case.randint(1, HYSTERESIS + 1, 1, stream="ht", shared=True),
    }


def roofline(s: Setting) -> Traffic:
    n, world = s["numel"], s.world_size
    shard = n // world
    # fp16 buffer read once; fp32 param, m, v read and written for the owned shard.
    return Traffic(link_bytes=traffic.reduce_scatter(2 * n, world),
                   hbm_bytes=2 * n + 6 * 4 * shard, flops=world * shard + 15 * shard)


PROBLEM = Problem(
    id=203,
    slug="fp16-grad-reduce-found-inf-adam",
    title="fp16 loss-scaled gradient reduce-scatter with global inf/NaN check and Adam step",
    description=(
        "Mixed-precision training with a dynamic loss scale (Megatron-LM's distributed optimizer, "
        "Apex/DeepSpeed fp16): the fp16 gradient buffer, still multiplied by the loss scale, is "
        "pre-scaled by 1/dp and reduce-scattered so each data-parallel rank owns one shard; the "
        "shard is copied to fp32, unscaled and checked for inf/NaN; the per-shard flags are "
        "all-reduced with MAX so that every rank skips the step together if any shard "
        "overflowed; otherwise Adam updates the rank's shard of fp32 master weights; finally the "
        "loss scaler backs off (after `hysteresis` overflows) or grows every 1000 clean steps. "
        "The tiny found-inf all-reduce sits between a 64 MiB reduce-scatter and the optimizer, "
        "serialising the step; a fast kernel fuses unscale, check and Adam into one pass over "
        "the shard and hides the flag exchange. fp16 is the dtype that loss scaling exists for."
    ),
    categories=("data", "fsdp_zero"),
    source=Source("Megatron-LM",
                  "megatron/core/optimizer/optimizer.py: MixedPrecisionOptimizer._unscale_main_grads_and_check_for_nan",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("reduce_scatter", "all_reduce"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 4096}, "default": {"numel": 32 * 2**20}},
    # Loss scaling exists for fp16; master weights and Adam state are fp32.
    dtypes=(torch.float16,),
    tolerances=tolerances(float16=(1e-8, 2e-3)),
    traffic=roofline,
    tags=("backward",),
)
