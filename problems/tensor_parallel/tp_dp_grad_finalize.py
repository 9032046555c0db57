"""Finalising gradients on a TP x DP grid: data-parallel average, then TP all-reduce of the
sequence-parallel (layer-norm) and TP-averaged gradients (Megatron-LM finalize_model_grads)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import groups, traffic
from problems.spec import Case, GroupLayout, Problem, Setting, Source, Traffic, tolerances


def reference(grad_buffer: torch.Tensor, sp_grads: torch.Tensor, tp_avg_grads: torch.Tensor, *,
              tp_group: dist.ProcessGroup, dp_group: dist.ProcessGroup
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # grad_buffer: flat gradients of this rank's tensor-parallel shards of the weights.
    # sp_grads: [layers, 4, hidden], grads of the layer norms (weight and bias of the two norms
    #   of every layer). They are replicated parameters, but under sequence parallelism each TP
    #   rank saw only its tokens, so the true gradient is the sum over the TP group.
    # tp_avg_grads: grads of replicated parameters marked average_gradients_across_tp_domain,
    #   which every TP rank computed in full: they are averaged over the TP group.
    dp = dist.get_world_size(dp_group)
    tp = dist.get_world_size(tp_group)
    # 1. Data-parallel sync of every gradient (DistributedDataParallel.finish_grad_sync):
    #    pre-scale by 1/dp, then sum, which averages over the replicas.
    outs = []
    for g in (grad_buffer, sp_grads, tp_avg_grads):
        g = g / dp
        dist.all_reduce(g, op=dist.ReduceOp.SUM, group=dp_group)
        outs.append(g)
    grad_buffer_out, sp_out, avg_out = outs
    # 2. _allreduce_non_tensor_model_parallel_grads: one coalesced all-reduce of the summed
    #    grads and one of the averaged grads over the TP group.
    if tp > 1:
        flat = sp_out.reshape(-1)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=tp_group)
        avg_out = avg_out / tp
        dist.all_reduce(avg_out, op=dist.ReduceOp.SUM, group=tp_group)
    return grad_buffer_out, sp_out, avg_out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    return {
        "grad_buffer": case.randn(case["shard_numel"], stream="g"),
        "sp_grads": case.randn(case["layers"], 4, case["hidden"], stream="sp"),
        "tp_avg_grads": case.randn(case["avg_numel"], stream="avg"),
    }


def process_groups(world_size: int) -> GroupLayout:
    # Megatron order: TP ranks consecutive, DP strided; tp = world/2 (1 on 2 ranks) keeps dp = 2.
    return groups.tp_dp(world_size, groups.half_tp(world_size))


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    tp = groups.half_tp(n)
    dp = n // tp
    small = (s["layers"] * 4 * s["hidden"] + s["avg_numel"]) * e
    total = s["shard_numel"] * e + small
    link = traffic.all_reduce(total, dp) + traffic.all_reduce(small, tp)
    # Scale and sum over dp for every element; the small tensors are also summed over tp.
    flops = total / e * dp + small / e * tp
    return Traffic(link_bytes=link, hbm_bytes=2 * total, flops=flops)


PROBLEM = Problem(
    id=412,
    slug="tp-dp-grad-finalize",
    title="TP x DP gradient finalisation (DP average, TP all-reduce of sequence-parallel grads)",
    description=(
        "At the end of each Megatron-LM training step, finalize_model_grads first averages every "
        "gradient over the data-parallel replicas (the DDP bucket all-reduce, pre-scaled by 1/dp) "
        "and then fixes up the replicated parameters inside each tensor-parallel group: layer-norm "
        "weights and biases under sequence parallelism only saw the rank's slice of the tokens, so "
        "their gradients are summed over TP, and parameters flagged "
        "average_gradients_across_tp_domain are averaged over TP "
        "(_allreduce_non_tensor_model_parallel_grads, one coalesced all-reduce per kind). The "
        "ranks form a TP x DP grid (TP consecutive, DP strided), so the step mixes a large "
        "all-reduce on the strided DP groups with small latency-bound all-reduces on the TP "
        "groups. A fast implementation issues the DP reduction as one pass over the buffer and "
        "folds the TP fix-up of the small tensors into it instead of serialising three "
        "collectives."
    ),
    categories=("tensor", "data"),
    source=Source(
        "Megatron-LM",
        "megatron/core/distributed/finalize_model_grads.py: finalize_model_grads "
        "(_allreduce_non_tensor_model_parallel_grads)",
        "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"shard_numel": 1000, "layers": 2, "hidden": 16, "avg_numel": 24},
           "default": {"shard_numel": 32 * 2**20, "layers": 32, "hidden": 8192,
                       "avg_numel": 65536}},
    tolerances=tolerances(float32=(1e-5, 1e-5), bfloat16=(2e-2, 2e-2)),
    traffic=roofline,
    dtypes=(torch.float32, torch.bfloat16),
    world_size_note="tp = world/2, dp = 2 (tp = 1 on 2 ranks, where the TP step is a no-op).",
    process_groups=process_groups,
    tags=("backward",),
)
