"""Plain reduce (sum) to rank 0 of the group."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.sweeps import elements


def reference(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # The root returns the sum over the group; every other rank returns its own input
    # unchanged (a backend may use a non-root's buffer as scratch, so it reduces a copy).
    root = dist.get_global_rank(group, 0)
    buf = x.clone()
    dist.reduce(buf, dst=root, op=dist.ReduceOp.SUM, group=group)
    return buf if dist.get_rank(group) == 0 else x.clone()


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    return {"x": case.randn(case["numel"], stream="x")}


def roofline(s: Setting) -> Traffic:
    nbytes = s["numel"] * s.itemsize
    return Traffic(link_bytes=traffic.reduce(nbytes, s.world_size), hbm_bytes=2 * nbytes,
                   flops=(s.world_size - 1) * s["numel"])


PROBLEM = Problem(
    id=106,
    slug="reduce",
    title="Reduce (sum, root 0)",
    description=(
        "Every rank holds a buffer and only rank 0 needs the elementwise sum, e.g. metrics, "
        "statistics or a gradient that a single owner applies. The root's incoming links and "
        "its adds are the bottleneck: a fast kernel has every peer reduce a different slice of "
        "the buffer first (a reduce-scatter among all ranks) and then sends the reduced slices to "
        "the root, so the root receives each byte once instead of world-1 times. Non-root ranks "
        "return their input unchanged."
    ),
    categories=("collective",),
    source=Source("PyTorch", "torch/distributed/distributed_c10d.py: reduce",
                  "https://github.com/pytorch/pytorch"),
    collectives=("reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 4096 + 17}, "default": {"numel": 32 * 2**20}},
    # NCCL's ring adds in bf16 hop by hop, so its sum carries up to world_size - 1 roundings of
    # partial sums (|partial| ~ 4-8 here, one bf16 ulp = 1/32) while a kernel that accumulates in
    # fp32 rounds once: they differ by 2 ulp near zero at 4 ranks (measured on H200, 2026-11-21).
    # A wrong sum (a missing or doubled peer) is off by ~1 on most elements and still fails.
    tolerances=tolerances(bfloat16=(2.5e-1, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    sweep=elements("reduce"),
    pkb_ids=(4,),
)
