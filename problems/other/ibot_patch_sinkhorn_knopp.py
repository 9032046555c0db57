"""DINOv2's iBOT patch loss: Sinkhorn-Knopp over the masked patches of the global batch."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(teacher_output: torch.Tensor, teacher_temp: float,
              n_masked_patches_tensor: torch.Tensor, n_iterations: int, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # teacher_output [m, K]: the teacher's prototype scores for this rank's m masked patches
    # (m differs between ranks), float32 or bfloat16; n_masked_patches_tensor [1]: m. Returns
    # the balanced soft assignments [m, K] float32.
    q = torch.exp(teacher_output.float() / teacher_temp).t()  # [K, m]
    prototypes = q.shape[0]
    # The batch is the number of masked patches over all ranks, not world x local rows.
    total_patches = n_masked_patches_tensor.to(q.dtype).reshape(1)
    dist.all_reduce(total_patches, group=group)
    mass = q.sum().reshape(1)
    dist.all_reduce(mass, group=group)
    q = q / mass
    for _ in range(n_iterations):
        rows = q.sum(dim=1, keepdim=True)  # per prototype, over every rank's patches
        dist.all_reduce(rows, group=group)
        q = q / rows / prototypes
        q = q / q.sum(dim=0, keepdim=True) / total_patches  # per patch, local
    return (q * total_patches).t()


def _patches(s: Setting, rank: int) -> int:
    # Masking ratios are drawn per image, so ranks hold different numbers of masked patches.
    return s["patches"] + (s["patches"] // 3 if rank % 2 else 0)


def make_inputs(case: Case) -> dict[str, object]:
    m = _patches(case, case.rank)
    # The scores come in the run's dtype (bfloat16 from a bf16 teacher); the balancing is
    # float32 whatever they are, as DINOv2 does it.
    return {"teacher_output": case.randn(m, case["prototypes"], stream="t", std=0.5),
            "teacher_temp": 0.07,
            "n_masked_patches_tensor": torch.full((1,), m, dtype=torch.int64, device=case.device),
            "n_iterations": 3}


def roofline(s: Setting) -> Traffic:
    k = s["prototypes"]
    rows = max(_patches(s, r) for r in range(s.world_size))
    nbytes = 4 * rows * k
    return Traffic(link_bytes=3 * traffic.all_reduce(4 * k, s.world_size),
                   hbm_bytes=2 * nbytes, flops=(4 + 6 * 3) * rows * k)


PROBLEM = Problem(
    id=1311,
    slug="ibot-patch-sinkhorn-knopp",
    title="Distributed Sinkhorn-Knopp over masked patches (DINOv2 iBOT loss)",
    description=(
        "Besides the class-token loss, DINOv2 trains with iBOT's masked-patch loss, whose "
        "teacher targets are centred with Sinkhorn-Knopp over every masked patch in the global "
        "batch. Each rank holds a different number of masked patches (masking ratios vary per "
        "image), so the batch size in the normalisation is the all-reduced count of masked "
        "patches; the global mass is all-reduced once, and each of the iterations all-reduces "
        "the per-prototype row sums (a vector as long as the prototype count) before the local "
        "per-patch normalisation. The exchanges are small and latency-bound and each depends on "
        "a full pass over the [patches, prototypes] matrix; a fast kernel fuses the passes "
        "with the sums and keeps the matrix resident."
    ),
    categories=("other",),
    source=Source("DINOv2", "dinov2/loss/ibot_patch_loss.py: iBOTPatchLoss.sinkhorn_knopp_teacher",
                  "https://github.com/facebookresearch/dinov2"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"patches": 12, "prototypes": 48},
           "default": {"patches": 2048, "prototypes": 65536}},
    tolerances=tolerances(float32=(1e-6, 1e-5), bfloat16=(1e-6, 1e-5)),
    traffic=roofline,
    dtypes=(torch.float32, torch.bfloat16),
    tags=("latency", "variable-size"),
    pkb_ids=(80,),
)
