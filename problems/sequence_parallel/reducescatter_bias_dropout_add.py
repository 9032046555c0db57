"""Reduce-scatter into the sequence-parallel region fused with bias + dropout + residual add
(Megatron-LM TransformerLayer after a row-parallel projection)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

DROPOUT_P = 0.1  # Megatron's default hidden_dropout


def reference(partial: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor,
              keep_mask: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # partial: [seq, batch, hidden], this rank's partial sum from the row-parallel projection
    # (linear_proj or linear_fc2 with skip_bias_add, so the bias comes back separately).
    # residual: [seq / tp, batch, hidden], this rank's tokens of the residual stream.
    # keep_mask: [seq / tp, batch, hidden] bool, the dropout mask (stands in for the RNG).
    world = dist.get_world_size(group)
    out = torch.empty((partial.shape[0] // world, *partial.shape[1:]),
                      dtype=partial.dtype, device=partial.device)
    dist.reduce_scatter_tensor(out, partial.contiguous(), group=group)
    # bias_dropout_add: residual + dropout(x + bias), computed in fp32 and rounded once.
    h = (out.float() + bias.float()) * keep_mask / (1.0 - DROPOUT_P)
    return (residual.float() + h).to(partial.dtype)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n = case.world_size
    seq, batch, hidden = case["seq"], case["batch"], case["hidden"]
    # A draw of 0 out of 10 drops the element: probability 0.1.
    draw = case.randint(0, 10, seq // n, batch, hidden, stream="drop", dtype=torch.uint8)
    return {
        "partial": case.randn(seq, batch, hidden, stream="partial", std=n ** -0.5),
        "bias": case.randn(hidden, stream="bias", shared=True, std=0.1),
        "residual": case.randn(seq // n, batch, hidden, stream="residual"),
        "keep_mask": draw != 0,
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    full = s["seq"] * s["batch"] * s["hidden"]
    local = full // n
    # Read the partial, residual and mask; write the output shard.
    hbm = full * e + local * e + local + local * e
    return Traffic(link_bytes=traffic.reduce_scatter(full * e, n), hbm_bytes=hbm,
                   flops=full * (n - 1) / n + 4 * local)


PROBLEM = Problem(
    id=505,
    slug="sp-reducescatter-bias-dropout-add",
    title="Sequence-parallel reduce-scatter + bias + dropout + residual add",
    description=(
        "In a Megatron-LM TransformerLayer with sequence parallelism, the attention output "
        "projection and the MLP down projection are row-parallel layers with skip_bias_add: their "
        "partial sums are reduce-scattered along the sequence into the sequence-parallel region, "
        "and then the fused bias_dropout_add computes residual + dropout(x + bias) on each rank's "
        "tokens to form the new residual stream. The reduce-scatter carries a full activation "
        "(64-256 MiB) twice per layer, and the elementwise epilogue re-reads its output from "
        "memory. A fast kernel applies bias, dropout mask, scaling and residual as the reduced "
        "values arrive, so the epilogue costs no extra pass; the dropout mask is given as an "
        "input here because a replacement cannot reproduce the framework's RNG stream."
    ),
    categories=("sequence", "tensor"),
    source=Source(
        "Megatron-LM",
        "megatron/core/transformer/transformer_layer.py: TransformerLayer (self_attn_bda after "
        "linear_proj; megatron/core/fusions/fused_bias_dropout.py: _bias_dropout_add_func)",
        "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("reduce_scatter",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"seq": 16, "batch": 2, "hidden": 24},
           "default": {"seq": 4096, "batch": 2, "hidden": 8192}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
)
