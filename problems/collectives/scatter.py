"""Plain scatter of equal chunks from rank 0 of the group."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.sweeps import rows


def reference(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # x has shape (world, rows, hidden) on every rank, but only the root's is read (as in
    # torch.distributed.scatter, whose scatter_list matters on the source only): group rank r
    # receives the root's x[r].
    is_root = dist.get_rank(group) == 0
    out = torch.empty(x.shape[1:], dtype=x.dtype, device=x.device)
    chunks = [c.contiguous() for c in x.unbind(0)] if is_root else None
    dist.scatter(out, scatter_list=chunks, src=dist.get_global_rank(group, 0), group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    rows = case["rows"] // case.world_size
    return {"x": case.randn(case.world_size, rows, case["hidden"], stream="x")}


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    chunk_bytes = (s["rows"] // n) * s["hidden"] * s.itemsize
    in_bytes = n * chunk_bytes
    # The root reads its whole input once and writes its own chunk.
    return Traffic(link_bytes=traffic.scatter(in_bytes, n), hbm_bytes=in_bytes + chunk_bytes)


PROBLEM = Problem(
    id=108,
    slug="scatter",
    title="Scatter (root 0)",
    description=(
        "Rank 0 holds one chunk for every rank and sends chunk r to rank r: data loaders that "
        "read a global batch on one rank hand out per-rank micro-batches this way, and "
        "checkpoint loading scatters shards of a tensor read on one rank. The root's outgoing "
        "links carry everything; a fast kernel lets every peer pull its own chunk from the "
        "root's buffer concurrently over NVLink rather than one send per peer in turn."
    ),
    categories=("collective",),
    source=Source("PyTorch", "torch/distributed/distributed_c10d.py: scatter",
                  "https://github.com/pytorch/pytorch"),
    collectives=("scatter",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"rows": 64, "hidden": 40}, "default": {"rows": 8192, "hidden": 4096}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    sweep=rows("scatter"),
    pkb_ids=(5,),
)
