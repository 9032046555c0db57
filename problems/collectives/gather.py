"""Plain gather of equal shards to rank 0 of the group."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.sweeps import rows


def reference(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # The root returns the (world, *x.shape) stack of every rank's x in group-rank order;
    # every other rank returns a copy of its own x.
    world = dist.get_world_size(group)
    is_root = dist.get_rank(group) == 0
    parts = [torch.empty_like(x) for _ in range(world)] if is_root else None
    dist.gather(x, gather_list=parts, dst=dist.get_global_rank(group, 0), group=group)
    return torch.stack(parts) if is_root else x.clone()


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    rows = case["rows"] // case.world_size
    return {"x": case.randn(rows, case["hidden"], stream="x")}


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    shard_bytes = (s["rows"] // n) * s["hidden"] * s.itemsize
    out_bytes = n * shard_bytes
    return Traffic(link_bytes=traffic.gather(out_bytes, n), hbm_bytes=shard_bytes + out_bytes)


PROBLEM = Problem(
    id=107,
    slug="gather",
    title="Gather (root 0)",
    description=(
        "Every rank holds an equal block of rows and rank 0 needs all of them stacked in rank "
        "order: evaluation loops gather predictions or embeddings to one rank, and checkpoint "
        "code gathers sharded state before saving it. All traffic converges on the root's "
        "incoming links; a fast kernel has every peer write its block directly into the root's "
        "output at the right offset, all at once, instead of a point-to-point receive per peer "
        "into temporaries followed by a stacking copy."
    ),
    categories=("collective",),
    source=Source("PyTorch", "torch/distributed/distributed_c10d.py: gather",
                  "https://github.com/pytorch/pytorch"),
    collectives=("gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"rows": 64, "hidden": 40}, "default": {"rows": 8192, "hidden": 4096}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    sweep=rows("gather"),
    pkb_ids=(6,),
)
