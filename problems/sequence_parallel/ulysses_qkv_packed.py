"""Ulysses all-to-all of a packed QKV projection in one call, with sequence unpadding (VeOmni)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, ceil_div, tolerances


def reference(qkv: torch.Tensor, *, unpadded_seq: int, group: dist.ProcessGroup) -> torch.Tensor:
    # qkv: [batch, seq_pad / P, 3 * heads * head_dim], the fused QKV projection of this rank's
    # sequence block (the global sequence was zero-padded to a multiple of P before slicing).
    # Returns [batch, unpadded_seq, 3 * heads / P * head_dim]: the whole sequence, this rank's
    # head block of q, k and v, laid out as [q | k | v] along the last dimension.
    world = dist.get_world_size(group)
    batch, s_local, width = qkv.shape
    proj = width // 3
    # View the last dim as [3, P, proj / P] and send head block r of each of q, k, v to rank r.
    send = qkv.reshape(batch, s_local, 3, world, proj // world).permute(3, 0, 1, 2, 4).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    # recv[r] is sequence block r: [P, batch, s_local, 3, proj/P] -> [batch, P * s_local, 3 * proj/P].
    out = recv.permute(1, 0, 2, 3, 4).reshape(batch, world * s_local, 3 * (proj // world))
    return out[:, :unpadded_seq].contiguous()


def make_inputs(case: Case) -> dict[str, object]:
    n = case.world_size
    width = 3 * case["heads"] * case["head_dim"]
    return {
        "qkv": case.randn(case["batch"], ceil_div(case["seq"], n), width, stream="qkv"),
        "unpadded_seq": case["seq"],
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    width = 3 * s["heads"] * s["head_dim"]
    local_bytes = s["batch"] * ceil_div(s["seq"], n) * width * e
    out_bytes = s["batch"] * s["seq"] * width // n * e
    return Traffic(link_bytes=traffic.all_to_all(local_bytes, n), hbm_bytes=local_bytes + out_bytes)


PROBLEM = Problem(
    id=503,
    slug="ulysses-qkv-packed",
    title="Ulysses all-to-all of packed QKV in one call (with unpadding)",
    description=(
        "Instead of three all-to-alls for q, k and v, VeOmni's gather_seq_scatter_heads_qkv "
        "(used by its DiT and multimodal models, the same Ulysses scheme as verl's "
        "gather_seq_scatter_heads) exchanges the fused QKV projection output in a single call: "
        "the last dimension is viewed as [3, heads * head_dim] and split by heads, so every rank "
        "receives its head block of q, k and v for the whole sequence, laid out [q | k | v]. When "
        "the sequence length is not a multiple of the Ulysses degree, the global sequence was "
        "padded before slicing, and the padding rows are dropped after the gather. One "
        "exchange per layer carries 3x the activation of a single tensor (hundreds of MiB at "
        "long context). The plain path transposes before sending and copies again to unpad; a "
        "fast kernel sends each (head block, q/k/v) slice straight from the projection layout "
        "and never writes the padding rows."
    ),
    categories=("sequence",),
    source=Source(
        "VeOmni",
        "veomni/distributed/sequence_parallel/ulysses.py: gather_seq_scatter_heads_qkv",
        "https://github.com/ByteDance-Seed/VeOmni"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 2, "seq": 30, "heads": 8, "head_dim": 4},
           "default": {"batch": 1, "seq": 16384, "heads": 32, "head_dim": 128}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    pkb_ids=(38,),
)
