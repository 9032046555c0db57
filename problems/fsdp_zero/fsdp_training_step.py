"""An end-to-end FSDP training step: parameter all-gather, forward/backward, gradient
reduce-scatter, AdamW on this rank's shard."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.training_step import (
    STEP_SIZES, adamw, mlp_grads, padded_count, param_count, step_flops)


def reference(x: torch.Tensor, y: torch.Tensor, param_shard: torch.Tensor, exp_avg: torch.Tensor,
              exp_avg_sq: torch.Tensor, hidden: int, step: int, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # x [b, d_in], y [b, d_out]: this rank's micro-batch. param_shard, exp_avg, exp_avg_sq:
    # this rank's 1/N of the flat float32 (or bfloat16) parameters (W1, b1, W2, b2, zero-padded to a multiple
    # of N) and of the Adam moments. Returns the updated shard and moments.
    world = dist.get_world_size(group)
    flat = torch.empty(world * param_shard.numel(), dtype=param_shard.dtype,
                       device=param_shard.device)
    dist.all_gather_into_tensor(flat, param_shard, group=group)
    grad = mlp_grads(x, y, flat, hidden)
    # FSDP's post-backward: reduce-scatter the flat gradient, divide by the world size.
    grad_shard = torch.empty_like(param_shard)
    dist.reduce_scatter_tensor(grad_shard, grad, group=group)
    grad_shard /= world
    return adamw(param_shard, grad_shard, exp_avg, exp_avg_sq, step)


def make_inputs(case: Case) -> dict[str, object]:
    d_in, hidden, d_out, b = case["d_in"], case["hidden"], case["d_out"], case["batch"]
    used = param_count(d_in, hidden, d_out)
    total = padded_count(d_in, hidden, d_out, case.world_size)
    shard = total // case.world_size
    mine = slice(case.rank * shard, (case.rank + 1) * shard)

    def flat(name: str, **kw) -> torch.Tensor:
        full = (case.rand(total, stream=name, shared=True, **kw) if "low" in kw
                else case.randn(total, stream=name, shared=True, **kw))
        # FlatParameter padding is zero and stays zero.
        keep = torch.arange(total, device=full.device) < used
        return (full * keep)[mine].contiguous()

    return {"x": case.randn(b, d_in, stream="x"), "y": case.randn(b, d_out, stream="y"),
            "param_shard": flat("params", std=d_in ** -0.5),
            "exp_avg": flat("m", std=1e-3),
            "exp_avg_sq": flat("v", low=1e-6, high=1e-4),
            "hidden": hidden, "step": case["step"]}


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    total = padded_count(s["d_in"], s["hidden"], s["d_out"], n)
    full = total * s.itemsize
    shard = full / n
    return Traffic(link_bytes=traffic.all_gather(full, n) + traffic.reduce_scatter(full, n),
                   # gathered weights written then read twice; gradient written and read;
                   # shard, moments read and written
                   hbm_bytes=3 * full + 2 * full + 6 * shard,
                   flops=step_flops(s["batch"], total) + 16 * total / n)


PROBLEM = Problem(
    id=314,
    slug="fsdp-training-step",
    title="End-to-end FSDP training step (all-gather, forward, backward, reduce-scatter, AdamW)",
    description=(
        "A whole fully-sharded data-parallel step as FSDP (FlatParameter) runs it for one "
        "unit: each rank holds 1/N of the flat parameters and Adam moments; it all-gathers "
        "the parameters, runs forward and backward on its micro-batch (a two-layer MLP with "
        "an MSE loss), reduce-scatters the flat gradient so that each rank receives the sum "
        "for its own shard, divides by the world size and applies AdamW to its shard only. "
        "Per step the model crosses the links twice, once as parameters and once as "
        "gradients; the real code overlaps the gather with the previous unit and the "
        "reduce-scatter with the next unit's backward, and a fast version fuses the "
        "averaging into the optimizer."
    ),
    categories=("fsdp_zero",),
    source=Source("PyTorch", "torch/distributed/fsdp/_runtime_utils.py: _pre_forward_unshard, "
                  "_post_backward_hook (reduce-scatter) with torch/optim/adamw.py: adamw",
                  "https://github.com/pytorch/pytorch"),
    collectives=("all_gather", "reduce_scatter"),
    reference=reference,
    make_inputs=make_inputs,
    sizes=STEP_SIZES,
    tolerances=tolerances(float32=(1e-5, 1e-5), bfloat16=(2e-2, 2e-2)),
    traffic=roofline,
    dtypes=(torch.float32, torch.bfloat16),
    tags=("end-to-end", "optimizer", "backward"),
    pkb_ids=(47,),
)
