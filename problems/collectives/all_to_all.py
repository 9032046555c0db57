"""Plain all-to-all with even splits: chunk j of rank i goes to rank j, slot i."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.sweeps import all_to_all_elements


def reference(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x, group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    # `numel` elements per rank, split into world_size equal chunks of (rows, hidden).
    rows = case["numel"] // (case.world_size * case["hidden"])
    return {"x": case.randn(case.world_size * rows, case["hidden"], stream="x")}


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    rows = s["numel"] // (n * s["hidden"])
    in_bytes = n * rows * s["hidden"] * s.itemsize
    return Traffic(link_bytes=traffic.all_to_all(in_bytes, n), hbm_bytes=2 * in_bytes)


PROBLEM = Problem(
    id=104,
    slug="all-to-all",
    title="All-to-all (even splits)",
    description=(
        "Every rank splits its buffer into world-size equal row blocks and sends block j to rank "
        "j, receiving one block from every peer in rank order. This is the exchange under MoE "
        "token dispatch/combine and the sequence<->head transpose of Ulysses attention, issued "
        "twice per layer per direction at tens of MiB, with nothing to overlap it with. Every "
        "pair of GPUs talks at once, so a fast kernel writes each block straight into the peer's "
        "output slot over NVLink, with all peers in flight together."
    ),
    categories=("collective",),
    source=Source("PyTorch", "torch/distributed/distributed_c10d.py: all_to_all_single",
                  "https://github.com/pytorch/pytorch"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 8 * 24 * 40, "hidden": 40},
           "default": {"numel": 32 * 2**20, "hidden": 4096}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    sweep=all_to_all_elements(),
    pkb_ids=(8,),
)
