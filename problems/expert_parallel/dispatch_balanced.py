"""MoE dispatch with perfectly balanced routing: static, even all-to-all (Megatron drop-and-pad)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
              num_experts: int, *, group: dist.ProcessGroup):
    """Dispatch when every expert gets exactly C = T*k/E pairs from every rank.

    The split sizes are known without a count exchange (Megatron's drop-and-pad path with
    capacity C), so one even all-to-all moves the rows. Output order on the receiving rank:
    local expert, then source rank, then source token index (Megatron sorts the received chunks
    by local expert, sort_chunks_by_idxs). Returns recv_x [T*k, H], recv_weights [T*k] float32,
    recv_src_index [T*k] int64 (= src_rank * T + token).
    """
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    tokens, k = topk_idx.shape
    local_experts = num_experts // world
    capacity = tokens * k // num_experts

    flat_expert = topk_idx.reshape(-1)
    flat_token = torch.arange(tokens * k, device=x.device) // k
    order = torch.argsort(flat_expert * tokens + flat_token)
    send_token = flat_token[order]
    send_x = x.index_select(0, send_token)
    send_w = topk_weights.reshape(-1)[order].float()
    send_src = send_token + rank * tokens

    recv_x = torch.empty_like(send_x)
    dist.all_to_all_single(recv_x, send_x, group=group)
    recv_w = torch.empty_like(send_w)
    dist.all_to_all_single(recv_w, send_w, group=group)
    recv_src = torch.empty_like(send_src)
    dist.all_to_all_single(recv_src, send_src, group=group)

    # [source rank, local expert, C] -> [local expert, source rank, C]
    def by_expert(t: torch.Tensor) -> torch.Tensor:
        shaped = t.view(world, local_experts, capacity, -1).transpose(0, 1)
        return shaped.reshape(tokens * k, *t.shape[1:])

    return by_expert(recv_x), by_expert(recv_w), by_expert(recv_src)


def make_inputs(case: Case) -> dict:
    tokens, experts, k = case["tokens"], case["experts"], case["topk"]
    # Slot s = t*k + j of a shuffled token list takes expert sigma(s mod E): the k experts of a
    # token are distinct and every expert receives exactly T*k/E pairs from this rank.
    token_perm = case.randperm(tokens, stream="token_perm")
    expert_perm = case.randperm(experts, stream="expert_perm")
    slots = torch.arange(tokens * k, device=case.device)
    base = expert_perm[slots % experts].view(tokens, k)
    idx = torch.empty_like(base)
    idx[token_perm] = base
    logits = case.randn(tokens, k, stream="router", dtype=torch.float32)
    return {
        "x": case.randn(tokens, case["hidden"], stream="x"),
        "topk_idx": idx,
        "topk_weights": torch.softmax(logits, dim=-1),
        "num_experts": experts,
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden, k = s.world_size, s["tokens"], s["hidden"], s["topk"]
    row = hidden * s.itemsize + 4 + 8
    # No dedup assumed: with balanced routing the per-pair all-to-all is what the real code runs.
    return Traffic(link_bytes=traffic.all_to_all(tokens * k * row, n),
                   hbm_bytes=tokens * hidden * s.itemsize + tokens * k * row + tokens * k * 8,
                   flops=0.0)


PROBLEM = Problem(
    id=1003,
    slug="moe-dispatch-balanced",
    title="MoE dispatch with balanced routing (static even all-to-all, expert-major output)",
    description=(
        "Megatron's all-to-all dispatcher in drop-and-pad mode (moe_pad_expert_input_to_capacity) "
        "sends every expert exactly its capacity of tokens from every rank, so the split sizes "
        "are static, the count exchange disappears and the exchange is one even all-to-all, which "
        "is CUDA-graph friendly. Here the routing is perfectly balanced by construction (capacity "
        "factor 1, no drops): each rank sends T*k/E rows to each expert. After the all-to-all the "
        "received chunks are reordered from (source rank, local expert) to (local expert, source "
        "rank) so each expert's rows are contiguous for the grouped GEMM. The exchange is T*k*H "
        "elements per rank per layer; a fast kernel writes the permuted rows directly into the "
        "expert-major slots of the peers' receive buffers, fusing permute, all-to-all and sort."
    ),
    categories=("expert",),
    source=Source("Megatron-LM",
                  "megatron/core/transformer/moe/token_dispatcher.py: MoEAlltoAllTokenDispatcher.token_permutation "
                  "(drop_and_pad) + moe_utils.py: sort_chunks_by_idxs",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 32, "hidden": 32, "experts": 16, "topk": 4},
           "default": {"tokens": 4096, "hidden": 4096, "experts": 64, "topk": 4}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
)
