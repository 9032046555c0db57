"""MoE dispatch under skewed routing: hot experts overload one rank (uneven all-to-all)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
              num_experts: int, *, group: dist.ProcessGroup):
    """Send every (token, chosen expert) pair to the rank that owns the expert.

    Experts are laid out contiguously: rank r owns experts [r*E_local, (r+1)*E_local).
    Output row order on the receiving rank: by source rank, then local expert, then the
    token's index on the source rank (ascending). Returns
      recv_x [R, H], recv_weights [R] (float32 router weight of that pair),
      tokens_per_expert [E_local] (int64), recv_src_index [R] (int64, src_rank * T + token).
    """
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    tokens, k = topk_idx.shape
    local_experts = num_experts // world

    # Local permutation (Megatron moe_utils.permute): pairs sorted by (expert, token).
    flat_expert = topk_idx.reshape(-1)
    flat_token = torch.arange(tokens * k, device=x.device) // k
    order = torch.argsort(flat_expert * tokens + flat_token)
    send_token = flat_token[order]
    send_x = x.index_select(0, send_token)
    send_w = topk_weights.reshape(-1)[order].float()
    send_src = send_token + rank * tokens

    # Exchange the per-expert counts so every rank knows what it will receive.
    counts = torch.bincount(flat_expert, minlength=num_experts).to(torch.int64)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=group)
    input_splits = counts.view(world, local_experts).sum(1).tolist()
    recv_matrix = recv_counts.view(world, local_experts)  # [source rank, local expert]
    output_splits = recv_matrix.sum(1).tolist()
    received = sum(output_splits)

    recv_x = x.new_empty((received, x.shape[1]))
    dist.all_to_all_single(recv_x, send_x, output_splits, input_splits, group=group)
    recv_w = send_w.new_empty((received,))
    dist.all_to_all_single(recv_w, send_w, output_splits, input_splits, group=group)
    recv_src = send_src.new_empty((received,))
    dist.all_to_all_single(recv_src, send_src, output_splits, input_splits, group=group)
    return recv_x, recv_w, recv_matrix.sum(0), recv_src


def make_inputs(case: Case) -> dict:
    tokens, experts, k, hot = case["tokens"], case["experts"], case["topk"], case["hot_experts"]
    # Every token's first choice is one of the `hot` experts 0..hot-1 (all owned by rank 0);
    # its other k-1 choices are the top-(k-1) of random logits over the remaining experts.
    first = case.randint(0, hot, tokens, 1, stream="hot_choice")
    logits = case.randn(tokens, experts, stream="router", dtype=torch.float32)
    rest_w, rest = torch.topk(torch.softmax(logits[:, hot:], dim=-1), k - 1, dim=-1)
    idx = torch.cat([first, rest + hot], dim=1)
    hot_logit = case.randn(tokens, 1, stream="hot_logit", dtype=torch.float32) + 2.0
    weights = torch.softmax(torch.cat([hot_logit, torch.log(rest_w)], dim=1), dim=-1)
    return {
        "x": case.randn(tokens, case["hidden"], stream="x"),
        "topk_idx": idx,
        "topk_weights": weights,
        "num_experts": experts,
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden, experts, k, hot = (s.world_size, s["tokens"], s["hidden"], s["experts"],
                                           s["topk"], s["hot_experts"])
    local = experts // n
    row = hidden * s.itemsize
    # Busiest rank is rank 0: from every other rank it receives all T tokens (hot choice) plus,
    # in expectation, its share of the k-1 other choices; per token once (dedup): a token misses
    # rank 0's other experts only through the hot slot, so it arrives once.
    rows_per_source = tokens
    link = (n - 1) * rows_per_source * (row + 12 * k)
    pairs_in = n * tokens * (1 + (k - 1) * (local - hot) / (experts - hot))
    hbm = tokens * row + pairs_in * (row + 12)
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=0.0)


PROBLEM = Problem(
    id=1004,
    slug="moe-dispatch-hot-expert",
    title="MoE dispatch with hot experts (skewed routing, one overloaded rank)",
    description=(
        "The same count-exchange + uneven all-to-all dispatch as moe-dispatch-all-to-all, under "
        "the routing skew that real MoE training and serving see before load balancing catches "
        "up (the reason DeepSeek built EPLB): every token's first choice is one of a few hot "
        "experts that all live on rank 0, so rank 0 receives about world*T rows while the other "
        "ranks receive far fewer. The layer's time is set by the hot rank's incoming links and "
        "its memory writes; a fast implementation keeps all of rank 0's links busy at once, "
        "sends each token once per destination rank and avoids serialising the senders on the "
        "hot receiver. Output order as in moe-dispatch-all-to-all: source rank, local expert, "
        "source token index."
    ),
    categories=("expert",),
    source=Source("Megatron-LM",
                  "megatron/core/transformer/moe/token_dispatcher.py: MoEAlltoAllTokenDispatcher.token_permutation "
                  "(also DeepEP deep_ep/buffer.py: Buffer.dispatch)",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 24, "hidden": 32, "experts": 16, "topk": 4, "hot_experts": 2},
           "default": {"tokens": 2048, "hidden": 4096, "experts": 64, "topk": 4, "hot_experts": 2}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
)
