"""Full expert-parallel MoE layer forward, Mixtral routing: dispatch, SwiGLU experts, combine."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
              w13: torch.Tensor, w2: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    """out[t] = sum_j w[t, j] * Expert_{e(t, j)}(x[t]) with experts spread over the group.

    Rank r owns experts [r*E_local, (r+1)*E_local) with weights w13 [E_local, H, 2F] (gate |
    up) and w2 [E_local, F, H]; Expert(x) = (silu(x @ gate) * (x @ up)) @ w2, computed in the
    input dtype. The weighted top-k sum accumulates in float32 over j = 0..k-1 and is cast back.
    """
    world = dist.get_world_size(group)
    tokens, k = topk_idx.shape
    local_experts = w13.shape[0]
    num_experts = local_experts * world
    hidden = x.shape[1]

    # Dispatch (Megatron: permute -> all-to-all -> sort_chunks_by_idxs).
    flat_expert = topk_idx.reshape(-1)
    flat_token = torch.arange(tokens * k, device=x.device) // k
    order = torch.argsort(flat_expert * tokens + flat_token)
    send_x = x.index_select(0, flat_token[order])
    counts = torch.bincount(flat_expert, minlength=num_experts).to(torch.int64)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=group)
    m = recv_counts.view(world, local_experts)                   # [source rank, local expert]
    in_splits = counts.view(world, local_experts).sum(1).tolist()
    out_splits = m.sum(1).tolist()
    got = x.new_empty((int(m.sum()), hidden))
    dist.all_to_all_single(got, send_x, out_splits, in_splits, group=group)
    chunks = got.split(m.reshape(-1).tolist(), 0)

    # Experts: each local expert processes its chunks from every source rank.
    results = [None] * (world * local_experts)
    for l in range(local_experts):
        ids = [s * local_experts + l for s in range(world)]
        rows = torch.cat([chunks[i] for i in ids], 0)
        gate, up = (rows @ w13[l]).chunk(2, dim=-1)
        y = (F.silu(gate) * up) @ w2[l]
        for i, piece in zip(ids, y.split([chunks[i].shape[0] for i in ids], 0)):
            results[i] = piece

    # Combine (reverse all-to-all, unpermute with router weights).
    back = x.new_empty((tokens * k, hidden))
    dist.all_to_all_single(back, torch.cat(results, 0), in_splits, out_splits, group=group)
    by_pair = torch.empty_like(back)
    by_pair[order] = back
    out = (by_pair.view(tokens, k, hidden).float() * topk_weights.float().unsqueeze(-1)).sum(1)
    return out.to(x.dtype)


def make_inputs(case: Case) -> dict:
    tokens, experts, k, hidden, ffn = (case["tokens"], case["experts"], case["topk"],
                                       case["hidden"], case["ffn"])
    local = experts // case.world_size
    logits = case.randn(tokens, experts, stream="router", dtype=torch.float32)
    top, idx = torch.topk(logits, k, dim=-1)
    return {
        "x": case.randn(tokens, hidden, stream="x"),
        "topk_idx": idx,
        "topk_weights": torch.softmax(top, dim=-1),  # Mixtral: softmax over the top-k logits
        "w13": case.randn(local, hidden, 2 * ffn, stream="w13", std=hidden ** -0.5),
        "w2": case.randn(local, ffn, hidden, stream="w2", std=ffn ** -0.5),
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden, experts, k, ffn = (s.world_size, s["tokens"], s["hidden"], s["experts"],
                                          s["topk"], s["ffn"])
    row = hidden * s.itemsize
    local = experts // n
    # Two-way all-to-all of the remote (token, expert) pairs (with E=8 and top-2 a token rarely
    # hits two experts of one rank, so dedup gains little; counted per pair).
    pairs = tokens * k
    link = 2 * pairs * (n - 1) / n * row
    weights = local * 3 * hidden * ffn * s.itemsize
    hbm = weights + 2 * tokens * row + 4 * pairs * row + pairs * 2 * ffn * s.itemsize
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=6.0 * pairs * hidden * ffn)


PROBLEM = Problem(
    id=1010,
    slug="moe-layer-forward-mixtral",
    title="Expert-parallel MoE layer forward (Mixtral routing: 8 experts, top-2, SwiGLU)",
    description=(
        "The whole routed-expert block of a Mixtral-style layer under expert parallelism, as "
        "Megatron runs it with the all-to-all dispatcher and grouped MLP: permute tokens by "
        "expert, exchange counts, all-to-all the rows to the expert ranks, run each local "
        "expert's SwiGLU MLP on its rows (sorted expert-major), all-to-all the outputs back and "
        "sum the top-2 outputs weighted by the router probabilities. With 8 experts over up to 8 "
        "ranks this is narrow EP: one or a few large experts per rank, so the all-to-alls are "
        "big and the grouped GEMMs long; the prize is overlapping the exchange with expert "
        "compute (chunked dispatch feeding GEMM tiles as rows arrive, combine of finished tiles "
        "while others compute). The FFN width is 7168 (half of Mixtral's 14336) to keep fp32 "
        "weights of four experts under 2 GiB per rank."
    ),
    categories=("expert",),
    source=Source("Megatron-LM",
                  "megatron/core/transformer/moe/moe_layer.py: MoELayer.forward "
                  "(MoEAlltoAllTokenDispatcher + experts.py: GroupedMLP)",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 16, "hidden": 32, "experts": 8, "topk": 2, "ffn": 48},
           "default": {"tokens": 4096, "hidden": 4096, "experts": 8, "topk": 2, "ffn": 7168}},
    tolerances=tolerances(bfloat16=(5e-2, 5e-2), float32=(1e-3, 1e-3)),
    traffic=roofline,
)
