"""DDP bf16 compression hook: fp32 gradient bucket cast to bf16, all-reduced, averaged, cast back."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(bucket: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    world = dist.get_world_size(group)
    compressed = bucket.to(torch.bfloat16).div_(world)
    dist.all_reduce(compressed, op=dist.ReduceOp.SUM, group=group)
    return compressed.to(bucket.dtype)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    return {"bucket": case.randn(case["numel"], stream="bucket", dtype=torch.float32)}


def roofline(s: Setting) -> Traffic:
    n = s["numel"]
    # Two bytes per element cross the links; the fp32 bucket is read and written once.
    return Traffic(link_bytes=traffic.all_reduce(2 * n, s.world_size), hbm_bytes=8 * n,
                   flops=s.world_size * n)


PROBLEM = Problem(
    id=202,
    slug="ddp-bf16-compress-hook",
    title="DDP bf16 gradient-compression hook",
    description=(
        "With the bf16_compress_hook registered, DistributedDataParallel casts each fp32 "
        "gradient bucket to bfloat16, divides it by the world size, all-reduces it in bf16 and "
        "casts the result back into the fp32 bucket, halving the bytes on the wire. The "
        "reference pays for three extra passes over the bucket (cast, divide, cast back) around "
        "a 25-100 MiB all-reduce; a fast kernel converts on the fly while reading peers' data "
        "and writes fp32 straight into the bucket. The inputs are fp32 (the hook's contract); "
        "the sum is accumulated in bf16 as in the reference, so tolerances are bf16-sized."
    ),
    categories=("data",),
    source=Source("PyTorch",
                  "torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py: bf16_compress_hook",
                  "https://github.com/pytorch/pytorch"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 4096 + 40}, "default": {"numel": 32 * 2**20}},
    # The bucket is fp32 by contract; the reduction runs in bf16.
    dtypes=(torch.float32,),
    tolerances=tolerances(float32=(2e-2, 2e-2)),
    traffic=roofline,
    tags=("backward",),
)
