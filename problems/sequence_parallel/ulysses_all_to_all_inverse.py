"""DeepSpeed-Ulysses head-to-sequence all-to-all (after attention)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(context: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # context: [seq, batch, heads / P, head_dim], attention output for this rank's heads over
    # the whole sequence. Returns [seq / P, batch, heads, head_dim]: this rank's sequence block
    # with every head (the inverse exchange: scatter the sequence, gather the heads).
    world = dist.get_world_size(group)
    seq, batch, h_local, d = context.shape
    # Sequence block r goes to rank r; blocks are already contiguous along the leading dim.
    send = context.contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    # recv viewed as [P (head block), seq / P, batch, heads / P, head_dim]: move heads inward.
    recv = recv.reshape(world, seq // world, batch, h_local, d).permute(1, 2, 0, 3, 4)
    return recv.reshape(seq // world, batch, world * h_local, d)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    return {"context": case.randn(case["seq"], case["batch"], case["heads"] // case.world_size,
                                  case["head_dim"], stream="ctx")}


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    local_bytes = s["seq"] * s["batch"] * s["heads"] // n * s["head_dim"] * s.itemsize
    return Traffic(link_bytes=traffic.all_to_all(local_bytes, n), hbm_bytes=2 * local_bytes)


PROBLEM = Problem(
    id=502,
    slug="ulysses-all-to-all-inverse",
    title="Ulysses head-to-sequence all-to-all (after attention)",
    description=(
        "After local attention, DeepSpeed-Ulysses' DistributedAttention returns to the "
        "sequence-sharded layout with the inverse _SeqAllToAll (scatter_idx=0, gather_idx=2): the "
        "[seq, batch, heads/P, head_dim] context is cut into P sequence blocks, block r goes to "
        "rank r, and the received head blocks are interleaved back into [seq/P, batch, heads, "
        "head_dim] for the output projection. It is the same volume as the forward exchange "
        "(also the backward of the q/k/v exchange), once per layer, and it sits between "
        "attention and the projection with nothing to overlap in the plain implementation. The "
        "reference transposes after receiving; a fast kernel scatters directly into the final "
        "interleaved layout on the destination and can start sending sequence blocks as soon as "
        "attention has finished them."
    ),
    categories=("sequence",),
    source=Source(
        "DeepSpeed",
        "deepspeed/sequence/layer.py: _SeqAllToAll.forward (single_all_to_all, scatter_idx=0, gather_idx=2)",
        "https://github.com/deepspeedai/DeepSpeed"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"seq": 16, "batch": 2, "heads": 8, "head_dim": 4},
           "default": {"seq": 16384, "batch": 1, "heads": 32, "head_dim": 128}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    pkb_ids=(37,),
)
