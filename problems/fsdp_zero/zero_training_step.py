"""What the end-to-end ZeRO-1 and ZeRO-2 training steps share: replicated parameters, sharded
optimizer state; the two stages differ only in how the gradients are reduced. Not a problem
itself (no PROBLEM); zero1_training_step.py and zero2_training_step.py are."""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.training_step import (
    STEP_SIZES, adamw, mlp_grads, padded_count, param_count, step_flops)


def zero_step(x, y, params, exp_avg, exp_avg_sq, hidden, step, group, *, stage: int):
    # x [b, d_in], y [b, d_out]: this rank's micro-batch. params [P]: the flat float32 (or bfloat16)
    # parameters (W1, b1, W2, b2, zero-padded to a multiple of N), replicated. exp_avg,
    # exp_avg_sq [P/N]: this rank's shard of the Adam moments. Returns the updated parameters
    # (every rank) and this rank's moments.
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    shard = params.numel() // world
    grad = mlp_grads(x, y, params, hidden)
    if stage == 1:
        # Stage 1: the whole gradient is all-reduced; each rank then reads its slice.
        dist.all_reduce(grad, group=group)
        grad_shard = grad[rank * shard:(rank + 1) * shard] / world
    else:
        # Stage 2: each rank only receives the sum for its own slice.
        grad_shard = torch.empty(shard, dtype=grad.dtype, device=grad.device)
        dist.reduce_scatter_tensor(grad_shard, grad, group=group)
        grad_shard /= world
    new_shard, m, v = adamw(params[rank * shard:(rank + 1) * shard], grad_shard, exp_avg,
                            exp_avg_sq, step)
    new_params = torch.empty_like(params)
    dist.all_gather_into_tensor(new_params, new_shard, group=group)
    return new_params, m, v


def make_inputs(case: Case) -> dict[str, object]:
    d_in, hidden, d_out = case["d_in"], case["hidden"], case["d_out"]
    used = param_count(d_in, hidden, d_out)
    total = padded_count(d_in, hidden, d_out, case.world_size)
    shard = total // case.world_size
    keep = torch.arange(total, device=case.device) < used
    mine = slice(case.rank * shard, (case.rank + 1) * shard)
    params = case.randn(total, stream="params", shared=True, std=d_in ** -0.5) * keep.to(case.dtype)
    m = case.randn(total, stream="m", shared=True, std=1e-3) * keep.to(case.dtype)
    v = case.rand(total, stream="v", shared=True, low=1e-6, high=1e-4) * keep.to(case.dtype)
    return {"x": case.randn(case["batch"], d_in, stream="x"),
            "y": case.randn(case["batch"], d_out, stream="y"),
            "params": params, "exp_avg": m[mine].contiguous(), "exp_avg_sq": v[mine].contiguous(),
            "hidden": hidden, "step": case["step"]}


def _roofline(stage: int) -> Callable[[Setting], Traffic]:
    def roofline(s: Setting) -> Traffic:
        n = s.world_size
        full = padded_count(s["d_in"], s["hidden"], s["d_out"], n) * s.itemsize
        reduce = traffic.all_reduce(full, n) if stage == 1 else traffic.reduce_scatter(full, n)
        return Traffic(link_bytes=reduce + traffic.all_gather(full, n),
                       hbm_bytes=2 * full + 2 * full + full + 6 * full / n,
                       flops=step_flops(s["batch"], full / s.itemsize) + 16 * full / s.itemsize / n)
    return roofline


def zero_problem(stage: int, pid: int, pkb: int, reference, summary: str) -> Problem:
    return Problem(
        id=pid,
        slug=f"zero{stage}-training-step",
        title=f"End-to-end ZeRO-{stage} training step",
        description=(
            f"A whole DeepSpeed ZeRO stage {stage} step: every data-parallel rank keeps the full "
            "parameters but only 1/N of the Adam moments. It runs forward and backward on its "
            f"micro-batch (a two-layer MLP with an MSE loss), {summary}, applies AdamW to its "
            "slice of the parameters, and all-gathers the updated slices so that every rank "
            "has the whole model for the next step. The gradient reduction and the parameter "
            "gather each move the whole model; a fast version overlaps the reduction with the "
            "backward, fuses the averaging into the optimizer and starts gathering slices as "
            "soon as they are updated."
        ),
        categories=("fsdp_zero",),
        source=Source("DeepSpeed", "deepspeed/runtime/zero/stage_1_and_2.py: "
                      "DeepSpeedZeroOptimizer.reduce_gradients and step (all_gather_dp_groups)",
                      "https://github.com/deepspeedai/DeepSpeed"),
        collectives=(("all_reduce",) if stage == 1 else ("reduce_scatter",)) + ("all_gather",),
        reference=reference,
        make_inputs=make_inputs,
        sizes=STEP_SIZES,
        tolerances=tolerances(float32=(1e-5, 1e-5), bfloat16=(2e-2, 2e-2)),
        traffic=_roofline(stage),
        dtypes=(torch.float32, torch.bfloat16),
        tags=("end-to-end", "optimizer", "backward"),
        pkb_ids=(pkb,),
    )
