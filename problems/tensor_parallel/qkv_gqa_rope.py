"""Sequence-parallel all-gather + column-parallel fused QKV projection with GQA head sharding + RoPE."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

ROPE_BASE = 10000.0


def _rope(t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # Non-interleaved rotary embedding on [seq, batch, heads, head_dim] (rotate_half form).
    half = t.shape[-1] // 2
    t32 = t.float()
    rotated = torch.cat((-t32[..., half:], t32[..., :half]), dim=-1)
    return (t32 * cos + rotated * sin).to(t.dtype)


def reference(x_shard: torch.Tensor, qkv_weight_shard: torch.Tensor, *, heads: int,
              kv_heads: int, group: dist.ProcessGroup
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # x_shard: [seq / tp, batch, hidden] (sequence parallel).
    # qkv_weight_shard: [local_groups * (heads/kv_heads + 2) * head_dim, hidden]: for each of the
    # rank's KV groups, the rows of its heads/kv_heads query heads, then its key head, then its
    # value head (Megatron's interleaved QKV layout).
    world = dist.get_world_size(group)
    x_full = torch.empty((x_shard.shape[0] * world, *x_shard.shape[1:]),
                         dtype=x_shard.dtype, device=x_shard.device)
    dist.all_gather_into_tensor(x_full, x_shard, group=group)
    seq, batch, _ = x_full.shape
    per_group = heads // kv_heads
    local_groups = kv_heads // world
    head_dim = qkv_weight_shard.shape[0] // (local_groups * (per_group + 2))
    mixed = torch.matmul(x_full, qkv_weight_shard.t())
    mixed = mixed.view(seq, batch, local_groups, (per_group + 2) * head_dim)
    q, k, v = torch.split(mixed, [per_group * head_dim, head_dim, head_dim], dim=3)
    q = q.reshape(seq, batch, local_groups * per_group, head_dim)
    # Rotary embedding of absolute positions 0..seq-1 (computed, not an input).
    inv_freq = 1.0 / (ROPE_BASE ** (torch.arange(0, head_dim, 2, dtype=torch.float32,
                                                 device=x_shard.device) / head_dim))
    freqs = torch.outer(torch.arange(seq, dtype=torch.float32, device=x_shard.device), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)[:, None, None, :]  # [seq, 1, 1, head_dim]
    cos, sin = emb.cos(), emb.sin()
    return _rope(q, cos, sin), _rope(k, cos, sin), v.contiguous()


def make_inputs(case: Case) -> dict[str, object]:
    n = case.world_size
    hidden, d = case["hidden"], case["head_dim"]
    heads, kv_heads = case["heads"], case["kv_heads"]
    rows = kv_heads // n * (heads // kv_heads + 2) * d
    return {
        "x_shard": case.randn(case["seq"] // n, case["batch"], hidden, stream="x"),
        "qkv_weight_shard": case.randn(rows, hidden, stream="wqkv", std=hidden ** -0.5),
        "heads": heads,
        "kv_heads": kv_heads,
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    tokens, hidden, d = s["seq"] * s["batch"], s["hidden"], s["head_dim"]
    rows = s["kv_heads"] // n * (s["heads"] // s["kv_heads"] + 2) * d
    x_bytes = tokens * hidden * e
    hbm = x_bytes / n + rows * hidden * e + tokens * rows * e
    return Traffic(link_bytes=traffic.all_gather(x_bytes, n), hbm_bytes=hbm,
                   flops=2 * tokens * hidden * rows + 3 * tokens * rows)


PROBLEM = Problem(
    id=416,
    slug="tp-qkv-gqa-rope",
    title="Sequence-parallel all-gather + GQA QKV column-parallel projection + RoPE",
    description=(
        "Megatron-LM's SelfAttention starts with linear_qkv, a column-parallel layer that, under "
        "sequence parallelism, first all-gathers the [seq/tp, batch, hidden] layer-norm output. "
        "With grouped-query attention the KV groups are sharded across tensor-parallel ranks and "
        "the weight rows are interleaved per group (the group's query heads, then its key head, "
        "then its value head), so get_query_key_value_tensors views the GEMM output per group and "
        "splits it into q [seq, batch, local_heads, head_dim] and k, v [seq, batch, local_groups, "
        "head_dim]; rotary embeddings are then applied to q and k. The all-gather of the full "
        "activation (tens of MiB) precedes the GEMM on the critical path. A fast kernel overlaps "
        "the gather with the GEMM chunk by chunk and applies the split and RoPE in the GEMM "
        "epilogue, writing q, k and v directly in their final layouts."
    ),
    categories=("tensor", "sequence"),
    source=Source(
        "Megatron-LM",
        "megatron/core/transformer/attention.py: SelfAttention.get_query_key_value_tensors "
        "(megatron/core/models/common/embeddings/rope_utils.py: _apply_rotary_pos_emb_bshd)",
        "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"seq": 16, "batch": 2, "hidden": 32, "heads": 16, "kv_heads": 8,
                     "head_dim": 4},
           "default": {"seq": 8192, "batch": 1, "hidden": 4096, "heads": 32, "kv_heads": 8,
                       "head_dim": 128}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
)
