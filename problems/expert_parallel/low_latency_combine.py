"""DeepEP low-latency combine for decoding: per-expert buffers back to tokens, weighted sum."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(expert_out: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
              num_experts: int, *, group: dist.ProcessGroup) -> torch.Tensor:
    """Inverse of moe-low-latency-dispatch followed by the top-k weighted sum.

    ``expert_out`` [E_local, world*T, H] holds this rank's expert outputs in the dispatch
    layout: for local expert l, slots are packed from 0 by source rank, then source token;
    slots past the expert's count are ignored. Output [T, H]: out[t] = sum_j w[t, j] *
    y(expert topk_idx[t, j], t), accumulated in float32 over j = 0..k-1, cast to the input dtype.
    """
    world = dist.get_world_size(group)
    tokens, k = topk_idx.shape
    local_experts = num_experts // world
    hidden = expert_out.shape[-1]

    # Rebuild the dispatch handle: counts per (source rank, local expert) on this rank.
    flat_expert = topk_idx.reshape(-1)
    order = torch.argsort(flat_expert * tokens + torch.arange(tokens * k, device=topk_idx.device) // k)
    counts = torch.bincount(flat_expert, minlength=num_experts).to(torch.int64)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=group)
    recv_matrix = recv_counts.view(world, local_experts)            # [source rank, local expert]
    offsets = torch.cumsum(recv_matrix, 0) - recv_matrix
    m, o = recv_matrix.tolist(), offsets.tolist()

    # Gather rows to return in (source rank, local expert, token) order.
    pieces = [expert_out[l, o[s][l]:o[s][l] + m[s][l]] for s in range(world)
              for l in range(local_experts)]
    send = torch.cat(pieces, 0) if pieces else expert_out.new_empty((0, hidden))
    out_splits = recv_matrix.sum(1).tolist()
    back_splits = counts.view(world, local_experts).sum(1).tolist()
    returned = expert_out.new_empty((tokens * k, hidden))
    dist.all_to_all_single(returned, send, back_splits, out_splits, group=group)

    # Returned rows are in this rank's (global expert, token) order.
    by_pair = torch.empty_like(returned)
    by_pair[order] = returned
    y = by_pair.view(tokens, k, hidden).float()
    return (y * topk_weights.float().unsqueeze(-1)).sum(dim=1).to(expert_out.dtype)


def make_inputs(case: Case) -> dict:
    tokens, experts, k, n = case["tokens"], case["experts"], case["topk"], case.world_size
    logits = case.randn(tokens, experts, stream="router", dtype=torch.float32)
    weights, idx = torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
    return {
        "expert_out": case.randn(experts // n, n * tokens, case["hidden"], stream="expert_out"),
        "topk_idx": idx,
        "topk_weights": weights / weights.sum(-1, keepdim=True),
        "num_experts": experts,
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden, k = s.world_size, s["tokens"], s["hidden"], s["topk"]
    row = hidden * s.itemsize
    # Low-latency combine returns one row per (token, expert) pair; the remote ones cross links.
    link = tokens * k * (n - 1) / n * row
    hbm = 2 * tokens * k * row + tokens * row + tokens * k * 12
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=2.0 * tokens * k * hidden)


PROBLEM = Problem(
    id=1007,
    slug="moe-low-latency-combine",
    title="DeepEP low-latency combine (decode, per-expert buffers -> weighted token sum)",
    description=(
        "The decode-time return path of DeepEP (low_latency_combine): after the masked grouped "
        "GEMM, each rank holds its experts' outputs in the fixed [E_local, world*T_max, H] "
        "layout that low-latency dispatch produced, and every row must go back to the rank and "
        "token it came from, where the k expert outputs are multiplied by the router weights and "
        "summed in float32. With 128 tokens per rank the payload is a few MiB and the cost is "
        "launch and synchronisation latency; DeepEP sends rows with direct peer writes and "
        "reduces on arrival in one graph-capturable kernel, while the reference rebuilds the "
        "layout with a count all-to-all and runs an uneven all-to-all plus an unpermute."
    ),
    categories=("expert",),
    source=Source("DeepEP", "deep_ep/buffer.py: Buffer.low_latency_combine",
                  "https://github.com/deepseek-ai/DeepEP"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 8, "hidden": 32, "experts": 16, "topk": 4},
           "default": {"tokens": 128, "hidden": 2048, "experts": 64, "topk": 6}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("inference", "latency"),
)
