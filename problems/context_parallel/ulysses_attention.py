"""Ulysses context parallelism: all-to-all to head-sharding, full-sequence attention, back."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _seq_to_heads(x: torch.Tensor, group) -> torch.Tensor:
    """[B, S/P, H, D] sequence-sharded -> [B, S, H/P, D] head-sharded."""
    p = dist.get_world_size(group)
    b, s, h, d = x.shape
    send = x.reshape(b, s, p, h // p, d).permute(2, 0, 1, 3, 4).contiguous()  # [P, B, s, h/P, D]
    recv = torch.empty_like(send)  # [P (source rank = sequence chunk), B, s, h/P, D]
    dist.all_to_all_single(recv, send, group=group)
    return recv.permute(1, 0, 2, 3, 4).reshape(b, p * s, h // p, d)


def _heads_to_seq(x: torch.Tensor, group) -> torch.Tensor:
    """[B, S, H/P, D] head-sharded -> [B, S/P, H, D] sequence-sharded."""
    p = dist.get_world_size(group)
    b, s_full, hp, d = x.shape
    s = s_full // p
    send = x.reshape(b, p, s, hp, d).permute(1, 0, 2, 3, 4).contiguous()  # [P, B, s, h/P, D]
    recv = torch.empty_like(send)  # [P (source rank = head group), B, s, h/P, D]
    dist.all_to_all_single(recv, send, group=group)
    return recv.permute(1, 2, 0, 3, 4).reshape(b, s, p * hp, d)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
              cp_group: dist.ProcessGroup) -> torch.Tensor:
    """q, k, v: [B, S/P, H, D], rank r holding tokens [r S/P, (r+1) S/P). Returns the causal
    self-attention output for the local tokens, [B, S/P, H, D] in q.dtype."""
    qh, kh, vh = (_seq_to_heads(t, cp_group) for t in (q, k, v))
    n = qh.shape[1]
    scores = torch.einsum("bqhd,bkhd->bhqk", qh.float(), kh.float()) * q.shape[-1] ** -0.5
    mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
    probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    out = torch.einsum("bhqk,bkhd->bqhd", probs, vh.float()).to(q.dtype)
    return _heads_to_seq(out, cp_group)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    b, s, h, d = case["batch"], case["seq_per_rank"], case["heads"], case["head_dim"]
    return {"q": case.randn(b, s, h, d, stream="q"),
            "k": case.randn(b, s, h, d, stream="k"),
            "v": case.randn(b, s, h, d, stream="v")}


def roofline(s: Setting) -> Traffic:
    p = s.world_size
    b, n, h, d = s["batch"], s["seq_per_rank"], s["heads"], s["head_dim"]
    blk = b * n * h * d * s.itemsize
    seq = n * p
    # Three all-to-alls in (q, k, v) and one out, each of one local block.
    return Traffic(link_bytes=4 * traffic.all_to_all(blk, p),
                   hbm_bytes=8 * blk,
                   flops=2 * b * (h // p) * seq * seq * d)  # causal half of 4*S^2*D per head


PROBLEM = Problem(
    id=705,
    slug="ulysses-cp-attention",
    title="Ulysses (all-to-all) context-parallel causal attention",
    description=(
        "DeepSpeed-Ulysses style context parallelism: Q, K and V arrive sharded by sequence; an "
        "all-to-all turns them into head shards covering the whole sequence, each rank runs "
        "ordinary causal attention for its H/P heads, and a second all-to-all returns the output "
        "to sequence shards. TransformerEngine ships the same scheme as the \"a2a\" CP type and "
        "verl/VeOmni use it for long-context RL. Four all-to-alls of a full activation block per "
        "layer sit directly before and after attention; fast versions fuse the layout changes "
        "into the transfers, start attention heads as soon as their pieces land, and overlap "
        "the output all-to-all with the tail of the attention."
    ),
    categories=("context", "sequence"),
    source=Source("DeepSpeed", "deepspeed/sequence/layer.py: DistributedAttention.forward "
                  "(single_all_to_all)", "https://github.com/deepspeedai/DeepSpeed"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "seq_per_rank": 8, "heads": 8, "head_dim": 16},
           "default": {"batch": 1, "seq_per_rank": 2048, "heads": 32, "head_dim": 128}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"cp_group": [list(range(world_size))]},
)
