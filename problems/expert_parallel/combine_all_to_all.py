"""MoE token combine: inverse uneven all-to-all + router-weighted sum (Megatron/DeepEP normal mode)."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(expert_out: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
              num_experts: int, *, group: dist.ProcessGroup) -> torch.Tensor:
    """Return the expert outputs to the ranks that own the tokens and sum them per token.

    ``expert_out`` holds this rank's expert outputs in the dispatch order of
    moe-dispatch-all-to-all (by source rank, local expert, source token); only its first R rows
    are used, R being the number of (token, expert) pairs this rank received. It is allocated at
    the worst case R <= world * T * min(k, E_local). Output: [T, H], out[t] = sum_j w[t, j] *
    y[t, j], accumulated in float32 over j = 0..k-1 and cast to the input dtype.
    """
    world = dist.get_world_size(group)
    tokens, k = topk_idx.shape
    local_experts = num_experts // world

    # The dispatch handle: this rank's (expert, token) permutation and everyone's counts.
    flat_expert = topk_idx.reshape(-1)
    flat_pair = torch.arange(tokens * k, device=topk_idx.device)
    order = torch.argsort(flat_expert * tokens + flat_pair // k)
    counts = torch.bincount(flat_expert, minlength=num_experts).to(torch.int64)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=group)
    back_splits = counts.view(world, local_experts).sum(1).tolist()  # rows coming home
    out_splits = recv_counts.view(world, local_experts).sum(1).tolist()  # rows going back
    received = sum(out_splits)

    returned = expert_out.new_empty((tokens * k, expert_out.shape[1]))
    dist.all_to_all_single(returned, expert_out[:received].contiguous(), back_splits, out_splits,
                           group=group)

    # Unpermute: row i of `returned` belongs to pair order[i] = (token, slot).
    by_pair = torch.empty_like(returned)
    by_pair[order] = returned
    y = by_pair.view(tokens, k, -1).float()
    out = (y * topk_weights.float().unsqueeze(-1)).sum(dim=1)
    return out.to(expert_out.dtype)


def make_inputs(case: Case) -> dict:
    tokens, experts, k, n = case["tokens"], case["experts"], case["topk"], case.world_size
    logits = case.randn(tokens, experts, stream="router", dtype=torch.float32)
    weights, idx = torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
    capacity = n * tokens * min(k, experts // n)
    return {
        "expert_out": case.randn(capacity, case["hidden"], stream="expert_out"),
        "topk_idx": idx,
        "topk_weights": weights / weights.sum(-1, keepdim=True),
        "num_experts": experts,
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden, experts, k = s.world_size, s["tokens"], s["hidden"], s["experts"], s["topk"]
    row = hidden * s.itemsize
    local = experts // n
    remote = (n - 1) * (1 - math.comb(experts - local, k) / math.comb(experts, k))
    # Best known (DeepEP combine): the expert rank pre-reduces a token's local-expert rows,
    # so each token comes back once per distinct remote rank.
    link = tokens * remote * row
    hbm = tokens * k * row + tokens * row + tokens * k * 12
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=2.0 * tokens * k * hidden)


PROBLEM = Problem(
    id=1002,
    slug="moe-combine-all-to-all",
    title="MoE token combine: inverse all-to-all + weighted top-k sum",
    description=(
        "The second half of an expert-parallel MoE layer: each expert rank holds the outputs of "
        "its local experts for the (token, expert) pairs it received in dispatch, and must send "
        "them back to the ranks that own the tokens, where the k expert outputs of every token "
        "are multiplied by the router weights and summed (Megatron's token_unpermutation with "
        "probs, DeepEP's Buffer.combine). The reference recomputes the dispatch layout from the "
        "routing (a small count all-to-all), runs the reverse uneven all-to-all and unpermutes. "
        "Like dispatch it moves about T*k*H elements per rank on the critical path of every MoE "
        "layer, forward and backward; fast kernels reduce a token's rows on the expert rank "
        "before sending, read peers' buffers directly and fuse the weighted sum into the receive."
    ),
    categories=("expert",),
    source=Source("Megatron-LM",
                  "megatron/core/transformer/moe/token_dispatcher.py: MoEAlltoAllTokenDispatcher.token_unpermutation "
                  "(also DeepEP deep_ep/buffer.py: Buffer.combine)",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 24, "hidden": 32, "experts": 16, "topk": 4},
           "default": {"tokens": 4096, "hidden": 2048, "experts": 64, "topk": 6}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    pkb_ids=(29,),
)
