"""Megatron-LM distributed optimizer parameter sync: each rank copies its updated fp32 main
parameter shard of every bucket into its shard of the bf16 parameter buffer, then each bucket of
the buffer is all-gathered in place (DistributedOptimizer._copy_main_params_to_model_params +
_ParamAndGradBucketGroup.start_param_sync)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(main_param_shard: torch.Tensor, param_buffer: torch.Tensor,
              bucket_numels: tuple[int, ...], *, group: dist.ProcessGroup) -> torch.Tensor:
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    bucket_start = 0  # offset of the bucket in the full parameter buffer
    shard_start = 0   # offset of this rank's shard of the bucket in the flat main shard
    for numel in bucket_numels:
        shard = numel // world  # buckets are padded to a multiple of the DP size
        bucket = param_buffer.narrow(0, bucket_start, numel)
        # Rank r owns the r-th contiguous shard of every bucket.
        local = bucket.narrow(0, rank * shard, shard)
        local.copy_(main_param_shard.narrow(0, shard_start, shard))
        dist.all_gather_into_tensor(bucket, local.clone(), group=group)
        bucket_start += numel
        shard_start += shard
    return param_buffer


def make_inputs(case: Case) -> dict[str, object]:
    buckets = tuple(case["bucket_numels"])
    total = sum(buckets)
    return {
        "main_param_shard": case.randn(total // case.world_size, stream="main",
                                       dtype=torch.float32, std=0.02),
        # Stale model-precision parameters from the previous step, overwritten in place.
        "param_buffer": case.randn(total, stream="params", std=0.02),
        "bucket_numels": buckets,
    }


def roofline(s: Setting) -> Traffic:
    total = sum(s["bucket_numels"])
    nbytes = total * s.itemsize
    return Traffic(link_bytes=traffic.all_gather(nbytes, s.world_size),
                   hbm_bytes=4 * total / s.world_size + nbytes)


PROBLEM = Problem(
    id=311,
    slug="megatron-distopt-param-all-gather",
    title="Megatron distributed optimizer: bucketed parameter all-gather",
    description=(
        "Megatron-LM's DistributedOptimizer keeps fp32 main parameters for only this rank's "
        "shard of each gradient/parameter bucket (about 40M parameters per bucket, padded to a "
        "multiple of the data-parallel size). After the optimizer step, "
        "_copy_main_params_to_model_params casts the rank's shard into its slice of the bf16 "
        "parameter buffer, and start_param_sync all-gathers every bucket in place so all ranks "
        "see the new weights; with overlap_param_gather the gathers are dispatched bucket by "
        "bucket ahead of the next forward. The whole model's parameters cross the links every "
        "step; a fast kernel fuses the cast with pushing each shard to all peers' buffers, one "
        "pass over the shard and no separate copy or per-bucket launches."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("Megatron-LM",
                  "megatron/core/distributed/param_and_grad_buffer.py: _ParamAndGradBucketGroup.start_param_sync",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"bucket_numels": (1024, 1024, 384)},
           "default": {"bucket_numels": (40_000_000, 40_000_000, 26_214_400)}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    may_overwrite=("param_buffer",),
)
