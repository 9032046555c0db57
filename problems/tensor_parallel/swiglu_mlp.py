"""Tensor-parallel SwiGLU MLP block: column-parallel gate/up, SiLU, row-parallel down, all-reduce."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(hidden_states: torch.Tensor, fc1_weight_shard: torch.Tensor,
              fc2_weight_shard: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # hidden_states: [seq, batch, hidden], replicated on every TP rank.
    # fc1_weight_shard: [2 * ffn / tp, hidden], this rank's gate rows followed by its up rows.
    # fc2_weight_shard: [hidden, ffn / tp], the matching input columns of the down projection.
    intermediate = torch.matmul(hidden_states, fc1_weight_shard.t())
    gate, up = torch.chunk(intermediate, 2, dim=-1)
    activated = F.silu(gate) * up
    out = torch.matmul(activated, fc2_weight_shard.t())  # partial sum over this rank's ffn slice
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n = case.world_size
    hidden, ffn = case["hidden"], case["ffn"]
    return {
        "hidden_states": case.randn(case["seq"], case["batch"], hidden, stream="x", shared=True),
        "fc1_weight_shard": case.randn(2 * ffn // n, hidden, stream="fc1", std=hidden ** -0.5),
        "fc2_weight_shard": case.randn(hidden, ffn // n, stream="fc2", std=ffn ** -0.5),
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    tokens, hidden, ffn_local = s["seq"] * s["batch"], s["hidden"], s["ffn"] // n
    act_bytes = tokens * hidden * e
    hbm = 2 * act_bytes + 3 * ffn_local * hidden * e
    flops = 2 * tokens * hidden * 2 * ffn_local + 2 * tokens * ffn_local * hidden + 4 * tokens * ffn_local
    return Traffic(link_bytes=traffic.all_reduce(act_bytes, n), hbm_bytes=hbm, flops=flops)


PROBLEM = Problem(
    id=409,
    slug="tp-swiglu-mlp",
    title="Tensor-parallel SwiGLU MLP block (column-parallel fc1, row-parallel fc2, all-reduce)",
    description=(
        "Megatron-LM's MLP with a gated linear unit splits the feed-forward dimension across "
        "tensor-parallel ranks: linear_fc1 is column-parallel and holds the rank's gate and up "
        "rows side by side, the SwiGLU activation silu(gate) * up is purely local, and linear_fc2 "
        "is row-parallel, so its output is a partial sum that is all-reduced across the TP group "
        "(vLLM's LlamaMLP has the same structure with MergedColumnParallelLinear and "
        "RowParallelLinear). The block is GEMM-bound, but the final all-reduce of a full "
        "[seq, batch, hidden] activation is exposed after the last GEMM; fused implementations "
        "keep the intermediate on chip, chunk the down projection along tokens and reduce each "
        "chunk over NVLink while the next one is computed."
    ),
    categories=("tensor",),
    source=Source(
        "Megatron-LM",
        "megatron/core/transformer/mlp.py: MLP.forward (gated_linear_unit, swiglu)",
        "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"seq": 8, "batch": 2, "hidden": 32, "ffn": 64},
           "default": {"seq": 2048, "batch": 2, "hidden": 4096, "ffn": 14336}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
)
