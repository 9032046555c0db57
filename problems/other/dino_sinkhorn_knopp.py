"""DINOv2 teacher centering by Sinkhorn-Knopp over the global batch (all-reduced sums)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

TEACHER_TEMP, N_ITERATIONS = 0.07, 3


def reference(teacher_output: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    world = dist.get_world_size(group)
    q = torch.exp(teacher_output.float() / TEACHER_TEMP).t()  # (prototypes, local batch)
    k, b = q.shape[0], q.shape[1] * world
    total = q.sum().reshape(1)
    dist.all_reduce(total, op=dist.ReduceOp.SUM, group=group)
    q = q / total
    for _ in range(N_ITERATIONS):
        # Rows (prototypes) span the global batch: their sums need every rank.
        rows = q.sum(dim=1, keepdim=True)
        dist.all_reduce(rows, op=dist.ReduceOp.SUM, group=group)
        q = q / rows / k
        # Columns (samples) are local.
        q = q / q.sum(dim=0, keepdim=True) / b
    return (q * b).t()


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    rows = case["batch"] // case.world_size
    return {"teacher_output": case.randn(rows, case["prototypes"], stream="t",
                                         dtype=torch.float32, std=0.5)}


def roofline(s: Setting) -> Traffic:
    k, rows = s["prototypes"], s["batch"] // s.world_size
    nbytes = 4 * rows * k
    return Traffic(link_bytes=N_ITERATIONS * traffic.all_reduce(4 * k, s.world_size),
                   hbm_bytes=2 * nbytes, flops=(4 + 6 * N_ITERATIONS) * rows * k)


PROBLEM = Problem(
    id=1301,
    slug="dino-sinkhorn-knopp",
    title="Distributed Sinkhorn-Knopp teacher centering (DINOv2)",
    description=(
        "DINOv2 centres the teacher's prototype scores with a few Sinkhorn-Knopp iterations "
        "over the whole global batch: exponentiate scores/temperature, normalise by the global "
        "sum, then alternately make every prototype's row sum equal (the row sums run over all "
        "ranks' samples, so each iteration all-reduces a vector of 65536 prototype sums) and "
        "every sample's column sum equal (local). Each iteration is a full pass over a "
        "batch x 65536 fp32 matrix followed by a latency-bound all-reduce it depends on; a fast "
        "kernel fuses the exponentiation with the first sums, keeps the matrix in place, and "
        "overlaps or fuses the row-sum exchange with the column normalisation. fp32, as the "
        "teacher output is cast to float before this step."
    ),
    categories=("other",),
    source=Source("DINOv2", "dinov2/loss/dino_clstoken_loss.py: DINOLoss.sinkhorn_knopp_teacher",
                  "https://github.com/facebookresearch/dinov2"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 16, "prototypes": 96}, "default": {"batch": 1024, "prototypes": 65536}},
    dtypes=(torch.float32,),
    tolerances=tolerances(float32=(1e-7, 1e-4)),
    traffic=roofline,
)
