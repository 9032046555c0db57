"""Plain broadcast from rank 0 of the group."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances
from problems.sweeps import elements


def reference(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # Every rank holds its own x; afterwards every rank holds group rank 0's x.
    out = x.clone()
    dist.broadcast(out, src=dist.get_global_rank(group, 0), group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    return {"x": case.randn(case["numel"], stream="x")}


def roofline(s: Setting) -> Traffic:
    nbytes = s["numel"] * s.itemsize
    return Traffic(link_bytes=traffic.broadcast(nbytes, s.world_size), hbm_bytes=2 * nbytes)


PROBLEM = Problem(
    id=105,
    slug="broadcast",
    title="Broadcast (root 0)",
    description=(
        "Rank 0 holds the buffer every other rank needs: DDP broadcasts the initial parameters "
        "and buffers from rank 0 at construction, RL trainers push refreshed policy weights to "
        "rollout workers, and inference servers broadcast sampled tokens and batch metadata. The "
        "root's outgoing links are the bottleneck; a fast kernel splits the buffer into pieces, "
        "sends a different piece to each peer and lets the peers forward their pieces to one "
        "another, so the root sends each byte only once while every link stays busy."
    ),
    categories=("collective",),
    source=Source("PyTorch", "torch/distributed/distributed_c10d.py: broadcast",
                  "https://github.com/pytorch/pytorch"),
    collectives=("broadcast",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 4096 + 17}, "default": {"numel": 32 * 2**20}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    sweep=elements("broadcast"),
    pkb_ids=(3,),
)
