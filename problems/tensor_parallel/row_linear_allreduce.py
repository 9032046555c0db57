"""Row-parallel linear layer followed by an all-reduce (Megatron-LM, no sequence parallelism)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.sweeps import gemm_tokens


def reference(x_parallel: torch.Tensor, weight_shard: torch.Tensor, bias: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # x_parallel: [seq, batch, in_features / tp]; weight_shard: [out_features, in_features / tp].
    out = torch.matmul(x_parallel, weight_shard.t())
    # Sum the partial products over the tensor-parallel group; every rank gets the full output.
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out + bias


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    in_per_rank = case["in_features"] // case.world_size
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
    out_bytes = tokens * out * e
    hbm = (tokens * in_per_rank + out * in_per_rank + out) * e + out_bytes
    return Traffic(link_bytes=traffic.all_reduce(out_bytes, n), hbm_bytes=hbm,
                   flops=2 * tokens * in_per_rank * out)


PROBLEM = Problem(
    id=404,
    slug="tp-row-linear-allreduce",
    title="Row-parallel linear + all-reduce (Megatron RowParallelLinear)",
    description=(
        "Without sequence parallelism, Megatron-LM's RowParallelLinear takes activations already "
        "split along the hidden dimension (the output of the column-parallel layer before it), "
        "multiplies them by the matching block of weight rows, and all-reduces the partial "
        "products across the tensor-parallel group before adding the bias. It closes every "
        "attention block and every MLP, and the all-reduce of a [seq, batch, hidden] activation "
        "(tens of MiB) is exposed on the critical path in the plain implementation. A fast kernel "
        "overlaps it with the GEMM: finished output tiles are reduce-scattered to their owners "
        "while later tiles are computed, then all-gathered, or written directly into peers' "
        "buffers over NVLink."
    ),
    categories=("tensor",),
    source=Source(
        "Megatron-LM",
        "megatron/core/tensor_parallel/layers.py: RowParallelLinear.forward "
        "(megatron/core/tensor_parallel/mappings.py: _reduce)",
        "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"seq": 12, "batch": 2, "in_features": 64, "out_features": 40},
           "default": {"seq": 2048, "batch": 2, "in_features": 16384, "out_features": 8192}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    sweep=gemm_tokens("all_reduce", param="seq", row_bytes="out_features", per="batch"),
    pkb_ids=(13,),
)
