"""Tensor-parallel attention over local heads + row-parallel output projection + all-reduce."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              proj_weight_shard: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # query: [seq, batch, heads / tp, head_dim]; key, value: [seq, batch, kv_heads / tp, head_dim]
    # (Megatron's sbhd layout). proj_weight_shard: [hidden, heads / tp * head_dim].
    seq, batch, heads, head_dim = query.shape
    groups = heads // key.shape[2]
    # Grouped-query attention: each local KV head serves `groups` consecutive query heads.
    k = key.repeat_interleave(groups, dim=2)
    v = value.repeat_interleave(groups, dim=2)
    q, k, v = (t.permute(1, 2, 0, 3) for t in (query, k, v))  # [batch, heads, seq, head_dim]
    context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    context = context.permute(2, 0, 1, 3).reshape(seq, batch, heads * head_dim)
    out = torch.matmul(context, proj_weight_shard.t())  # partial sum over this rank's heads
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n = case.world_size
    seq, batch, d = case["seq"], case["batch"], case["head_dim"]
    heads, kv_heads = case["heads"] // n, case["kv_heads"] // n
    return {
        "query": case.randn(seq, batch, heads, d, stream="q"),
        "key": case.randn(seq, batch, kv_heads, d, stream="k"),
        "value": case.randn(seq, batch, kv_heads, d, stream="v"),
        "proj_weight_shard": case.randn(case["hidden"], heads * d, stream="wo",
                                        std=(case["heads"] * d) ** -0.5),
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    seq, batch, d, hidden = s["seq"], s["batch"], s["head_dim"], s["hidden"]
    heads, kv_heads = s["heads"] // n, s["kv_heads"] // n
    out_bytes = seq * batch * hidden * e
    hbm = (seq * batch * (heads + 2 * kv_heads) * d + hidden * heads * d) * e + out_bytes
    # Causal attention: QK^T and PV over half of the score matrix; then the projection GEMM.
    flops = 2 * batch * heads * seq * seq * d + 2 * seq * batch * heads * d * hidden
    return Traffic(link_bytes=traffic.all_reduce(out_bytes, n), hbm_bytes=hbm, flops=flops)


PROBLEM = Problem(
    id=410,
    slug="tp-attention-oproj",
    title="Tensor-parallel attention (local GQA heads) + output projection + all-reduce",
    description=(
        "With tensor parallelism, Megatron-LM's Attention.forward runs core attention on the "
        "rank's own query heads and KV groups (no communication: heads are independent), "
        "reshapes the context to [seq, batch, local_heads * head_dim] and feeds it to linear_proj, "
        "a RowParallelLinear whose partial products are all-reduced across the TP group. The "
        "all-reduce of the full [seq, batch, hidden] output is the only collective of the "
        "attention block and waits for the last head's attention and the whole projection GEMM. "
        "A fast kernel streams the projection per sequence tile as attention finishes it and "
        "reduces the finished tiles over NVLink while later tiles (which are more expensive "
        "under a causal mask) are still being computed."
    ),
    categories=("tensor",),
    source=Source(
        "Megatron-LM",
        "megatron/core/transformer/attention.py: Attention.forward (core_attention, linear_proj)",
        "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"seq": 8, "batch": 2, "heads": 16, "kv_heads": 8, "head_dim": 8, "hidden": 32},
           "default": {"seq": 4096, "batch": 2, "heads": 32, "kv_heads": 8, "head_dim": 128,
                       "hidden": 4096}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
)
