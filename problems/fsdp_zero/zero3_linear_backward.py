"""ZeRO-3 backward of one linear layer: the weight is all-gathered again (it was released after
forward), the input and weight gradients are computed, and the weight and bias gradients are
reduce-scattered (coalesced) so each rank keeps the averaged gradient of its own partition
(DeepSpeed LinearFunctionForZeroStage3.backward + stage 3 reduce_scatter_coalesced)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, grad_output: torch.Tensor, weight_part: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    world = dist.get_world_size(group)
    in_features = x.shape[-1]
    out_features = grad_output.shape[-1]
    # Re-fetch the weight for backward.
    full = torch.empty(world * weight_part.numel(), dtype=weight_part.dtype, device=weight_part.device)
    dist.all_gather_into_tensor(full, weight_part, group=group)
    weight = full.view(out_features, in_features)
    grad_input = grad_output @ weight
    grad_weight = grad_output.t() @ x
    grad_bias = grad_output.sum(dim=0)
    # reduce_scatter_coalesced: rank r's chunk of every flattened gradient goes into row r of
    # one buffer, a single reduce-scatter sums the rows, then the sum is averaged (postscale).
    send = torch.cat([grad_weight.reshape(world, -1), grad_bias.reshape(world, -1)], dim=1)
    part = torch.empty(send.shape[1], dtype=send.dtype, device=send.device)
    dist.reduce_scatter_tensor(part, send.reshape(-1), op=dist.ReduceOp.SUM, group=group)
    part = part.float().div_(world)  # copied into the fp32 gradient partition
    nw = grad_weight.numel() // world
    return grad_input, part[:nw].clone(), part[nw:].clone()


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    world = case.world_size
    inp, out, t = case["in_features"], case["out_features"], case["tokens"]
    return {
        "x": case.randn(t, inp, stream="x"),
        "grad_output": case.randn(t, out, stream="dy", std=t ** -0.5),
        "weight_part": case.randn(out * inp // world, stream="w", std=inp ** -0.5),
    }


def roofline(s: Setting) -> Traffic:
    t, inp, out, n = s["tokens"], s["in_features"], s["out_features"], s.world_size
    w_bytes = out * inp * s.itemsize
    g_bytes = (out * inp + out) * s.itemsize
    act = (t * inp + t * out) * s.itemsize
    # Gather the weight, reduce-scatter its gradient (plus the bias gradient).
    link = traffic.all_gather(w_bytes, n) + traffic.reduce_scatter(g_bytes, n)
    # Read x, dy and the weight, write dx; write the gradient partition in fp32.
    hbm = act + w_bytes + t * inp * s.itemsize + 4 * (out * inp + out) / n
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=4 * t * inp * out)


PROBLEM = Problem(
    id=310,
    slug="zero3-linear-backward",
    title="ZeRO-3 linear backward: weight all-gather, GEMMs, gradient reduce-scatter",
    description=(
        "In DeepSpeed ZeRO stage 3 backward the linear layer's weight, released after forward, "
        "is all-gathered again; LinearFunctionForZeroStage3.backward computes the input gradient "
        "dY W and the weight and bias gradients dY^T X and sum(dY) on the rank's micro-batch, "
        "and the stage 3 optimizer reduce-scatters the weight and bias gradients together "
        "(reduce_scatter_coalesced lays out rank r's chunk of every flattened gradient in row r "
        "of one buffer), averages them and keeps only its own partition in fp32. Both "
        "collectives move the full weight (128 MiB of bf16 here) per layer per step; a fast "
        "kernel overlaps the gather with the dX GEMM and reduce-scatters dW tile by tile as the "
        "weight-gradient GEMM produces it. Outputs: dX, then this rank's fp32 partitions of dW "
        "(flat) and db."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("DeepSpeed",
                  "deepspeed/runtime/zero/linear.py: LinearFunctionForZeroStage3.backward; "
                  "deepspeed/runtime/comm/coalesced_collectives.py: reduce_scatter_coalesced",
                  "https://github.com/deepspeedai/DeepSpeed"),
    collectives=("all_gather", "reduce_scatter"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 16, "in_features": 32, "out_features": 48},
           "default": {"tokens": 4096, "in_features": 8192, "out_features": 8192}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    tags=("backward",),
)
