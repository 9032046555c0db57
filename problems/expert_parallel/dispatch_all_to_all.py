"""MoE token dispatch over expert parallelism with uneven all-to-all (Megatron/DeepEP normal mode)."""

from __future__ import annotations

import math

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
    tokens, experts, k = case["tokens"], case["experts"], case["topk"]
    logits = case.randn(tokens, experts, stream="router", dtype=torch.float32)
    weights, idx = torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
    return {
        "x": case.randn(tokens, case["hidden"], stream="x"),
        "topk_idx": idx,
        "topk_weights": weights / weights.sum(-1, keepdim=True),
        "num_experts": experts,
    }


def expected_remote_ranks(experts: int, k: int, world: int) -> float:
    """Expected number of other ranks a token's k distinct random experts land on."""
    local = experts // world
    miss = math.comb(experts - local, k) / math.comb(experts, k)
    return (world - 1) * (1 - miss)


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden, experts, k = s.world_size, s["tokens"], s["hidden"], s["experts"], s["topk"]
    row = hidden * s.itemsize
    # Best known (DeepEP): each token crosses the link once per distinct remote destination
    # rank, with its k routing entries; the receiver expands it to one row per local expert.
    link = tokens * expected_remote_ranks(experts, k, n) * (row + 12 * k)
    hbm = tokens * row + tokens * k * (row + 4 + 8) + tokens * k * 12
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=0.0)


PROBLEM = Problem(
    id=1001,
    slug="moe-dispatch-all-to-all",
    title="MoE token dispatch: count exchange + uneven all-to-all",
    description=(
        "In an expert-parallel MoE layer every rank routes each of its tokens to k experts that "
        "live on other ranks. Megatron's all-to-all dispatcher (and DeepEP's normal-mode dispatch) "
        "first sorts the (token, expert) pairs by expert, exchanges per-expert counts with a small "
        "all-to-all so each rank can size its receive buffer, then moves the token rows, their "
        "router weights and source indices with an uneven all-to-all. Received rows are ordered by "
        "source rank, then local expert, then source token index; the per-expert counts feed the "
        "grouped expert GEMM and the source indices drive the combine. This sits twice on the "
        "critical path of every MoE layer (dispatch and combine) and moves roughly T*k*H elements "
        "per rank; a fast kernel fuses the permutation into the transfer, writes straight into "
        "peers' buffers, and sends a token once per destination rank instead of once per expert."
    ),
    categories=("expert",),
    source=Source("Megatron-LM",
                  "megatron/core/transformer/moe/token_dispatcher.py: MoEAlltoAllTokenDispatcher.token_permutation "
                  "(also DeepEP deep_ep/buffer.py: Buffer.dispatch)",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 24, "hidden": 32, "experts": 16, "topk": 4},
           "default": {"tokens": 4096, "hidden": 4096, "experts": 64, "topk": 6}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    pkb_ids=(),
)
