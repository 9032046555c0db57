"""Plain reduce-scatter (sum): each rank gets the sum of one shard of everyone's buffer."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.sweeps import elements


def reference(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    world = dist.get_world_size(group)
    out = torch.empty((x.shape[0] // world,), dtype=x.dtype, device=x.device)
    dist.reduce_scatter_tensor(out, x, op=dist.ReduceOp.SUM, group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    shard = case["numel"] // case.world_size
    return {"x": case.randn(shard * case.world_size, stream="x")}


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    shard = s["numel"] // n
    in_bytes = shard * n * s.itemsize
    return Traffic(link_bytes=traffic.reduce_scatter(in_bytes, n),
                   hbm_bytes=in_bytes + shard * s.itemsize,
                   flops=(n - 1) * shard)


PROBLEM = Problem(
    id=103,
    slug="reduce-scatter",
    title="Reduce-scatter (sum)",
    description=(
        "Every rank holds a full-size buffer; rank r must end with the elementwise sum over all "
        "ranks of the r-th equal shard. ZeRO-2/3 and FSDP reduce gradients this way so that each "
        "rank only keeps the shard of the optimizer state it owns, and Megatron sequence "
        "parallelism uses it after every row-parallel linear layer. It moves half the bytes of an "
        "all-reduce; a fast kernel reads the peers' copies of its own shard directly and sums "
        "them in registers, in one pass and without staging buffers."
    ),
    categories=("collective",),
    source=Source("PyTorch", "torch/distributed/distributed_c10d.py: reduce_scatter_tensor",
                  "https://github.com/pytorch/pytorch"),
    collectives=("reduce_scatter",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 4096 + 24}, "default": {"numel": 64 * 2**20}},
    # NCCL's ring adds in bf16 hop by hop, so its sum carries up to world_size - 1 roundings of
    # partial sums (|partial| ~ 4-8 here, one bf16 ulp = 1/32) while a kernel that accumulates in
    # fp32 rounds once: they differ by 2 ulp near zero at 4 ranks (measured on H200, 2026-11-21).
    # A wrong sum (a missing or doubled peer) is off by ~1 on most elements and still fails.
    tolerances=tolerances(bfloat16=(2.5e-1, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    sweep=elements("reduce_scatter", sharded=True),
    pkb_ids=(7,),
)
