"""DeepSpeed-Ulysses sequence-to-head all-to-all before attention."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # x: [seq / P, batch, heads, head_dim], this rank's block of the sequence with every head
    # (DistributedAttention's default scatter_idx=2 (heads), gather_idx=0 (sequence)).
    # Returns [seq, batch, heads / P, head_dim]: the whole sequence for this rank's heads.
    world = dist.get_world_size(group)
    s_local, batch, heads, d = x.shape
    # Put the destination rank (head block) first so each peer's chunk is contiguous.
    send = x.reshape(s_local, batch, world, heads // world, d).permute(2, 0, 1, 3, 4).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    # recv[r] is sequence block r of our heads: concatenating along the sequence is a reshape.
    return recv.reshape(world * s_local, batch, heads // world, d)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    return {"x": case.randn(case["seq"] // case.world_size, case["batch"], case["heads"],
                            case["head_dim"], stream="x")}


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    local_bytes = s["seq"] // n * s["batch"] * s["heads"] * s["head_dim"] * s.itemsize
    return Traffic(link_bytes=traffic.all_to_all(local_bytes, n), hbm_bytes=2 * local_bytes)


PROBLEM = Problem(
    id=501,
    slug="ulysses-all-to-all",
    title="Ulysses sequence-to-head all-to-all (before attention)",
    description=(
        "DeepSpeed-Ulysses trains long sequences by splitting the sequence across ranks for "
        "everything except attention. Before attention, DistributedAttention runs _SeqAllToAll "
        "(single_all_to_all with scatter_idx=2, gather_idx=0) on each of q, k and v: the "
        "[seq/P, batch, heads, head_dim] shard is cut into P head blocks, block r goes to rank r, "
        "and each rank ends up with the full sequence for heads/P heads, so ordinary attention "
        "runs locally. The exchange is an all-to-all of the whole activation, three times per "
        "layer in the forward pass, 10-100 MiB each at long sequence lengths. The reference "
        "materialises a transposed copy before the collective; a fast kernel writes each head "
        "block straight from the source layout into the destination's buffer over NVLink and "
        "can overlap q, k and v with the QKV projection."
    ),
    categories=("sequence",),
    source=Source(
        "DeepSpeed",
        "deepspeed/sequence/layer.py: _SeqAllToAll.forward (single_all_to_all, scatter_idx=2, gather_idx=0)",
        "https://github.com/deepspeedai/DeepSpeed"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"seq": 16, "batch": 2, "heads": 8, "head_dim": 4},
           "default": {"seq": 16384, "batch": 1, "heads": 32, "head_dim": 128}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    pkb_ids=(33, 36),
)
