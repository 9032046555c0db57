"""DeepEP normal-mode dispatch for wide EP (DeepSeek-V3 routing: 256 experts, top-8)."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
              num_experts: int, *, group: dist.ProcessGroup):
    """Send each token once to every rank that owns at least one of its k experts.

    Rank r owns experts [r*E_local, (r+1)*E_local). Received rows are ordered by source rank,
    then source token index. Returns
      recv_x [R, H];
      recv_topk_idx [R, k] int64: the token's expert ids made local to this rank (e - r*E_local),
        -1 where the expert lives elsewhere;
      recv_topk_weights [R, k] float32: the router weight, 0 where recv_topk_idx is -1;
      recv_src_idx [R] int64: the token's index on its source rank;
      recv_tokens_per_rank [world] int64: rows received from each source rank;
      num_recv_tokens_per_expert [E_local] int64: received (token, local expert) pairs per expert.
    """
    world = dist.get_world_size(group)
    tokens, k = topk_idx.shape
    local_experts = num_experts // world

    dest_rank = topk_idx // local_experts                                   # [T, k]
    ranks = torch.arange(world, device=x.device)
    in_rank = (dest_rank.unsqueeze(1) == ranks.view(1, world, 1)).any(-1)   # [T, world]
    # Send list in (destination rank, token) order.
    send_rank, send_token = in_rank.t().nonzero(as_tuple=True)
    send_x = x.index_select(0, send_token)
    local_idx = topk_idx[send_token] - (send_rank * local_experts).unsqueeze(1)
    mine = (local_idx >= 0) & (local_idx < local_experts)
    send_idx = torch.where(mine, local_idx, torch.full_like(local_idx, -1))
    send_w = torch.where(mine, topk_weights[send_token].float(), torch.zeros((), device=x.device))

    counts = in_rank.sum(0).to(torch.int64)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=group)
    input_splits, output_splits = counts.tolist(), recv_counts.tolist()
    received = sum(output_splits)

    recv_x = x.new_empty((received, x.shape[1]))
    dist.all_to_all_single(recv_x, send_x, output_splits, input_splits, group=group)
    recv_idx = send_idx.new_empty((received, k))
    dist.all_to_all_single(recv_idx, send_idx, output_splits, input_splits, group=group)
    recv_w = send_w.new_empty((received, k))
    dist.all_to_all_single(recv_w, send_w, output_splits, input_splits, group=group)
    recv_src = send_token.new_empty((received,))
    dist.all_to_all_single(recv_src, send_token, output_splits, input_splits, group=group)

    valid = recv_idx >= 0
    per_expert = torch.bincount(recv_idx[valid], minlength=local_experts).to(torch.int64)
    return recv_x, recv_idx, recv_w, recv_src, recv_counts, per_expert


def make_inputs(case: Case) -> dict:
    tokens, experts, k = case["tokens"], case["experts"], case["topk"]
    # DeepSeek-V3 scores experts with a sigmoid and normalises the top-k weights.
    scores = torch.sigmoid(case.randn(tokens, experts, stream="router", dtype=torch.float32))
    weights, idx = torch.topk(scores, k, dim=-1)
    return {
        "x": case.randn(tokens, case["hidden"], stream="x"),
        "topk_idx": idx,
        "topk_weights": weights / weights.sum(-1, keepdim=True),
        "num_experts": experts,
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden, experts, k = s.world_size, s["tokens"], s["hidden"], s["experts"], s["topk"]
    local = experts // n
    hit = 1 - math.comb(experts - local, k) / math.comb(experts, k)   # P(token goes to a rank)
    row = hidden * s.itemsize + 12 * k + 8
    link = tokens * (n - 1) * hit * row
    hbm = tokens * hidden * s.itemsize + tokens * n * hit * row
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=0.0)


PROBLEM = Problem(
    id=1005,
    slug="moe-deepep-dispatch-wide-ep",
    title="DeepEP normal dispatch, wide EP (256 experts, top-8, one copy per destination rank)",
    description=(
        "DeepEP's normal-mode dispatch, built for DeepSeek-V3 training and prefill (hidden 7168, "
        "256 routed experts, top-8, 4096 tokens per rank): instead of one row per (token, "
        "expert) pair, a token crosses the interconnect once per destination rank that holds any "
        "of its experts, carrying its top-k ids rewritten as local ids (-1 for experts elsewhere) "
        "and weights; the receiver gets rows ordered by source rank and token, plus the per-rank "
        "and per-expert counts that size the expert GEMMs. With 256 experts a token usually hits "
        "several experts on one rank, so deduplication cuts the traffic well below T*k*H. The "
        "reference computes the is-token-in-rank layout, exchanges counts and runs four uneven "
        "all-to-alls; DeepEP does it in one kernel that writes into peers' NVLink buffers with "
        "per-channel queues and prefix-summed offsets, which is the target here."
    ),
    categories=("expert",),
    source=Source("DeepEP", "deep_ep/buffer.py: Buffer.dispatch (with Buffer.get_dispatch_layout)",
                  "https://github.com/deepseek-ai/DeepEP"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 32, "hidden": 32, "experts": 64, "topk": 4},
           "default": {"tokens": 4096, "hidden": 7168, "experts": 256, "topk": 8}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
)
