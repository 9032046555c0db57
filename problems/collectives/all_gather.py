"""Plain all-gather of equal-sized shards into one buffer."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.sweeps import elements


def reference(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    world = dist.get_world_size(group)
    out = torch.empty((world * x.shape[0],), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x, group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    # The gathered buffer holds `numel` elements; each rank owns an equal contiguous shard.
    return {"x": case.randn(case["numel"] // case.world_size, stream="x")}


def roofline(s: Setting) -> Traffic:
    shard = s["numel"] // s.world_size
    out_bytes = shard * s.world_size * s.itemsize
    return Traffic(link_bytes=traffic.all_gather(out_bytes, s.world_size),
                   hbm_bytes=shard * s.itemsize + out_bytes)


PROBLEM = Problem(
    id=102,
    slug="all-gather",
    title="All-gather",
    description=(
        "Every rank holds an equal shard and needs the concatenation of all shards in rank "
        "order. ZeRO-3/FSDP gathers each layer's parameters this way just before using them, "
        "and sequence/tensor parallelism gathers activations before a column-parallel GEMM, so "
        "the gather is on the forward critical path at tens of MiB per call. It is pure data "
        "movement: a fast kernel pulls each peer's shard straight into place over NVLink (or "
        "pushes its own shard to every peer) instead of relaying it hop by hop around a ring."
    ),
    categories=("collective",),
    source=Source("PyTorch", "torch/distributed/distributed_c10d.py: all_gather_into_tensor",
                  "https://github.com/pytorch/pytorch"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 4096 + 24}, "default": {"numel": 32 * 2**20}},
    # Data movement only: every element must arrive bit-exact.
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    sweep=elements("all_gather", sharded=True),
    pkb_ids=(2, 34),
)
