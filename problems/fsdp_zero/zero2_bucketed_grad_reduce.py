"""ZeRO-2 gradient reduction: each backward bucket of flattened gradients is averaged and
reduced slice by slice to the rank that owns that slice of the partitioned optimizer state
(DeepSpeed stage_1_and_2 reduce_ipg_grads / average_tensor)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(grads: torch.Tensor, fp32_grad_partition: torch.Tensor, bucket_numel: int, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    total = grads.numel()
    part = total // world  # rank r owns elements [r * part, (r + 1) * part) of the flat group
    for start in range(0, total, bucket_numel):
        end = min(start + bucket_numel, total)
        # The gradients of the params in this bucket, copied into the contiguous ipg buffer.
        bucket = grads[start:end].clone()
        bucket.div_(world)
        # A bucket need not line up with partitions: reduce each owner's slice to that owner.
        for owner in range(start // part, (end - 1) // part + 1):
            lo = max(start, owner * part)
            hi = min(end, (owner + 1) * part)
            piece = bucket[lo - start:hi - start]
            dist.reduce(piece, dst=dist.get_global_rank(group, owner), op=dist.ReduceOp.SUM,
                        group=group)
            if owner == rank:
                # Accumulate into this rank's fp32 gradient partition (gradient accumulation).
                fp32_grad_partition[lo - owner * part:hi - owner * part].add_(piece.float())
    return fp32_grad_partition


def make_inputs(case: Case) -> dict[str, object]:
    numel = case["numel"]
    return {
        "grads": case.randn(numel, stream="grads"),
        "fp32_grad_partition": case.randn(numel // case.world_size, stream="acc",
                                          dtype=torch.float32),
        "bucket_numel": case["bucket_numel"],
    }


def roofline(s: Setting) -> Traffic:
    n, numel = s.world_size, s["numel"]
    grad_bytes = numel * s.itemsize
    part = numel // n
    # Bandwidth-wise the per-owner reduces add up to a reduce-scatter of the whole gradient.
    return Traffic(link_bytes=traffic.reduce_scatter(grad_bytes, n),
                   hbm_bytes=grad_bytes + 2 * 4 * part, flops=numel + 2 * part)


PROBLEM = Problem(
    id=302,
    slug="zero2-bucketed-grad-reduce",
    title="ZeRO-2 bucketed gradient reduce to partition owners",
    description=(
        "In DeepSpeed ZeRO stage 2 the gradients produced during backward are copied into an "
        "independent-partition-gradient (ipg) bucket; when the bucket fills, average_tensor "
        "divides it by the data-parallel size and, because bucket boundaries do not line up "
        "with the optimizer partitions, reduces each owner's slice of the bucket to that owner "
        "with a separate reduce call; the owner adds the result to its fp32 gradient partition. "
        "This runs once per bucket in the backward pass and carries the whole model's gradients "
        "(about one reduce-scatter of them), so slice-by-slice reduces with their launch and "
        "synchronisation overhead are costly; a fused kernel treats the bucket stream as one "
        "reduce-scatter that writes the averaged sum straight into the fp32 accumulator."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("DeepSpeed",
                  "deepspeed/runtime/zero/stage_1_and_2.py: DeepSpeedZeroOptimizer.average_tensor",
                  "https://github.com/deepspeedai/DeepSpeed"),
    collectives=("reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 3000, "bucket_numel": 700},
           "default": {"numel": 64 * 2**20, "bucket_numel": 12_000_000}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    may_overwrite=("fp32_grad_partition",),
    tags=("backward",),
)
