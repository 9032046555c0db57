"""ZeRO-3 forward of one linear layer: the module's weight and bias partitions are all-gathered
in one coalesced collective, then the layer runs on this data-parallel rank's micro-batch
(DeepSpeed ZeRO stage 3 fetch + LinearFunctionForZeroStage3.forward)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, weight_part: torch.Tensor, bias_part: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    world = dist.get_world_size(group)
    # Fetch: the flat partitions of weight and bias side by side, one all-gather for the module.
    send = torch.cat([weight_part, bias_part])
    recv = torch.empty(world * send.numel(), dtype=send.dtype, device=send.device)
    dist.all_gather_into_tensor(recv, send, group=group)
    per_rank = recv.view(world, -1)
    nw = weight_part.numel()
    in_features = x.shape[-1]
    # Partition r of a flattened parameter is elements [r * n/N, (r+1) * n/N).
    weight = per_rank[:, :nw].reshape(-1, in_features)
    bias = per_rank[:, nw:].reshape(-1)
    return torch.addmm(bias, x, weight.t())


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    world = case.world_size
    inp, out = case["in_features"], case["out_features"]
    return {
        "x": case.randn(case["tokens"], inp, stream="x"),
        "weight_part": case.randn(out * inp // world, stream="w", std=inp ** -0.5),
        "bias_part": case.randn(out // world, stream="b", std=0.1),
    }


def roofline(s: Setting) -> Traffic:
    t, inp, out = s["tokens"], s["in_features"], s["out_features"]
    w_bytes = (out * inp + out) * s.itemsize
    # Read x, the gathered weight once (from wherever it lands), write y.
    return Traffic(link_bytes=traffic.all_gather(w_bytes, s.world_size),
                   hbm_bytes=(t * inp + t * out) * s.itemsize + w_bytes,
                   flops=2 * t * inp * out)


PROBLEM = Problem(
    id=309,
    slug="zero3-linear-forward",
    title="ZeRO-3 linear forward: coalesced weight all-gather + GEMM",
    description=(
        "Under DeepSpeed ZeRO stage 3 every rank stores only a flat 1/N partition of each "
        "parameter. When a linear module's forward starts, the partitioned-parameter "
        "coordinator fetches it: the partitions of its weight and bias are concatenated and "
        "all-gathered in one collective, the full tensors are cut out of the gathered buffer, "
        "and LinearFunctionForZeroStage3 computes x W^T + b on this rank's own micro-batch "
        "(data parallelism: every rank has different tokens). Prefetching hides part of the "
        "gather, but for a large projection (128 MiB of bf16 weight here) it still competes "
        "with the GEMM; a fast kernel pipelines the two, multiplying by the rows of the weight "
        "that have already arrived from each peer."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("DeepSpeed",
                  "deepspeed/runtime/zero/linear.py: LinearFunctionForZeroStage3.forward",
                  "https://github.com/deepspeedai/DeepSpeed"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 16, "in_features": 32, "out_features": 48},
           "default": {"tokens": 4096, "in_features": 8192, "out_features": 8192}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
)
