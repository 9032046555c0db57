"""Row-parallel GEMM followed by a reduce-scatter along the sequence (Megatron-LM, sequence parallel)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.sweeps import gemm_tokens


def reference(x_parallel: torch.Tensor, weight_shard: torch.Tensor, bias: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # x_parallel: [seq, batch, in_features / tp], the rank's slice of the hidden dimension.
    # weight_shard: [out_features, in_features / tp]; the product is a partial sum over ranks.
    world = dist.get_world_size(group)
    partial = torch.matmul(x_parallel, weight_shard.t())  # [seq, batch, out]
    seq, batch, out = partial.shape
    shard = torch.empty((seq // world, batch, out), dtype=partial.dtype, device=partial.device)
    # Sum the partial products and keep this rank's contiguous block of the sequence.
    dist.reduce_scatter_tensor(shard, partial.contiguous(), group=group)
    # The bias is added once, after the reduction, on the sequence shard.
    return shard + bias


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n = case.world_size
    in_per_rank = case["in_features"] // n
    return {
        "x_parallel": case.randn(case["seq"], case["batch"], in_per_rank, stream="x"),
        "weight_shard": case.randn(case["out_features"], in_per_rank, stream="w",
                                   std=case["in_features"] ** -0.5),
        "bias": case.randn(case["out_features"], stream="b", shared=True, std=0.1),
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    tokens = s["seq"] * s["batch"]
    in_per_rank, out = s["in_features"] // n, s["out_features"]
    partial_bytes = tokens * out * e
    hbm = (tokens * in_per_rank + out * in_per_rank + out) * e + partial_bytes / n
    return Traffic(link_bytes=traffic.reduce_scatter(partial_bytes, n), hbm_bytes=hbm,
                   flops=2 * tokens * in_per_rank * out)


PROBLEM = Problem(
    id=402,
    slug="tp-gemm-reducescatter",
    title="Tensor-parallel GEMM + reduce-scatter (row-parallel linear, sequence parallel)",
    description=(
        "In Megatron-LM's RowParallelLinear with sequence parallelism, each tensor-parallel rank "
        "multiplies its slice of the hidden dimension by the matching input-column block of the "
        "weight, producing a full-size partial sum [seq, batch, out]; a reduce-scatter along the "
        "sequence dimension then sums the partials and leaves every rank with its 1/tp block of "
        "tokens, to which the bias is added. This is the second half of every attention and MLP "
        "block (output projection and down projection), so it runs twice per layer in the forward "
        "pass with 64-256 MiB of partials. The reference computes the whole GEMM before the first "
        "byte moves; a fast kernel computes the output tile by tile in the order the ring or "
        "all-to-all needs it and pushes each finished tile to its owner while the next is computed."
    ),
    categories=("tensor", "sequence"),
    source=Source(
        "Megatron-LM",
        "megatron/core/tensor_parallel/layers.py: RowParallelLinear.forward "
        "(megatron/core/tensor_parallel/mappings.py: _reduce_scatter_along_first_dim)",
        "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("reduce_scatter",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"seq": 16, "batch": 2, "in_features": 64, "out_features": 48},
           "default": {"seq": 4096, "batch": 2, "in_features": 16384, "out_features": 8192}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    sweep=gemm_tokens("reduce_scatter", param="seq", row_bytes="out_features", per="batch"),
    pkb_ids=(16,),
)
