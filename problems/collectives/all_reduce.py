"""Plain all-reduce (sum) of a gradient-sized buffer."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.sweeps import elements


def reference(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    return {"x": case.randn(case["numel"], stream="x")}


def roofline(s: Setting) -> Traffic:
    nbytes = s["numel"] * s.itemsize
    # Read the local input and write the output once; the peers' data arrives over the links.
    return Traffic(link_bytes=traffic.all_reduce(nbytes, s.world_size),
                   hbm_bytes=2 * nbytes, flops=(s.world_size - 1) * s["numel"])


PROBLEM = Problem(
    id=101,
    slug="all-reduce",
    title="All-reduce (sum)",
    description=(
        "Every rank holds a buffer of the same shape and needs the elementwise sum over all "
        "ranks. This is the gradient synchronisation of data-parallel training and the reduction "
        "after every row-parallel layer in tensor parallelism; at 64 MiB it is bandwidth-bound, "
        "and the best kernels reach the NVLink limit by reading peers' buffers directly."
    ),
    categories=("collective",),
    source=Source("PyTorch", "torch/distributed/distributed_c10d.py: all_reduce",
                  "https://github.com/pytorch/pytorch"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 4096 + 17}, "default": {"numel": 32 * 2**20}},
    # NCCL's ring adds in bf16 hop by hop, so its sum carries up to world_size - 1 roundings of
    # partial sums (|partial| ~ 4-8 here, one bf16 ulp = 1/32) while a kernel that accumulates in
    # fp32 rounds once: they differ by 2 ulp near zero at 4 ranks (measured on H200, 2026-11-21).
    # A wrong sum (a missing or doubled peer) is off by ~1 on most elements and still fails.
    tolerances=tolerances(bfloat16=(2.5e-1, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    sweep=elements("all_reduce"),
    pkb_ids=(1,),
)
