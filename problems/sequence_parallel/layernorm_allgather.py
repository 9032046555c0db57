"""Sequence-parallel LayerNorm followed by the all-gather of its output (TransformerEngine LayerNormLinear)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

EPS = 1e-5


def reference(x_shard: torch.Tensor, ln_weight: torch.Tensor, ln_bias: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # x_shard: [seq / tp, batch, hidden], this rank's tokens of the residual stream.
    # Returns the normalised activations of the whole sequence, [seq, batch, hidden], which the
    # column-parallel GEMM that follows consumes.
    world = dist.get_world_size(group)
    ln_out = F.layer_norm(x_shard.float(), (x_shard.shape[-1],), ln_weight.float(),
                          ln_bias.float(), EPS).to(x_shard.dtype)
    total = torch.empty((ln_out.shape[0] * world, *ln_out.shape[1:]),
                        dtype=ln_out.dtype, device=ln_out.device)
    dist.all_gather_into_tensor(total, ln_out, group=group)
    return total


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    hidden = case["hidden"]
    return {
        "x_shard": case.randn(case["seq"] // case.world_size, case["batch"], hidden, stream="x",
                              std=2.0),
        "ln_weight": case.rand(hidden, stream="w", shared=True, low=0.5, high=1.5),
        "ln_bias": case.randn(hidden, stream="b", shared=True, std=0.1),
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    full_bytes = s["seq"] * s["batch"] * s["hidden"] * e
    hbm = full_bytes / n + 2 * s["hidden"] * e + full_bytes
    return Traffic(link_bytes=traffic.all_gather(full_bytes, n), hbm_bytes=hbm,
                   flops=8 * s["seq"] // n * s["batch"] * s["hidden"])


PROBLEM = Problem(
    id=504,
    slug="sp-layernorm-allgather",
    title="Sequence-parallel LayerNorm + all-gather of the normalised activations",
    description=(
        "With Megatron-style sequence parallelism the layer norms run on each rank's slice of the "
        "sequence, and the transition into the tensor-parallel region is an all-gather of the "
        "normalised output along the sequence: TransformerEngine's LayerNormLinear computes "
        "ln_out on the [seq/tp, batch, hidden] shard and then gathers it (gather_along_first_dim) "
        "before the QKV or fc1 GEMM. This happens twice per layer and carries a full activation "
        "(64-256 MiB). The plain path writes ln_out to memory, then the collective reads it again; "
        "a fused kernel normalises each row and stores it directly into every peer's gather "
        "buffer over NVLink, so the norm costs no extra pass and the gather starts with the first "
        "normalised rows."
    ),
    categories=("sequence", "tensor"),
    source=Source(
        "TransformerEngine",
        "transformer_engine/pytorch/module/layernorm_linear.py: _LayerNormLinear.forward "
        "(sequence_parallel: gather_along_first_dim of ln_out)",
        "https://github.com/NVIDIA/TransformerEngine"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"seq": 16, "batch": 2, "hidden": 32},
           "default": {"seq": 4096, "batch": 2, "hidden": 8192}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
)
