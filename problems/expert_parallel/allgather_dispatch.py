"""Megatron's all-gather based MoE token dispatcher (gather every token, keep the local experts')."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
              num_experts: int, *, group: dist.ProcessGroup):
    """All-gather tokens and routing over the TPxEP group, then permute for the local experts.

    Rank r owns experts [r*E_local, (r+1)*E_local). Global token g = src_rank * T + t. Output
    rows are ordered by local expert, then global token index. Returns permuted_x [R, H],
    tokens_per_expert [E_local] int64, permuted_probs [R] float32 (router weight of that pair)
    and global_token_index [R] int64 (the reverse mapping used by the combine's scatter-add).
    """
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    tokens, k = topk_idx.shape
    local_experts = num_experts // world

    all_x = x.new_empty((world * tokens, x.shape[1]))
    dist.all_gather_into_tensor(all_x, x, group=group)
    all_idx = topk_idx.new_empty((world * tokens, k))
    dist.all_gather_into_tensor(all_idx, topk_idx, group=group)
    w = topk_weights.float()
    all_w = w.new_empty((world * tokens, k))
    dist.all_gather_into_tensor(all_w, w, group=group)

    local = all_idx - rank * local_experts
    hit = (local >= 0) & (local < local_experts)                    # [world*T, k]
    pair_token, pair_slot = hit.nonzero(as_tuple=True)
    pair_expert = local[pair_token, pair_slot]
    order = torch.argsort(pair_expert * (world * tokens) + pair_token)
    token = pair_token[order]
    probs = all_w[pair_token, pair_slot][order]
    per_expert = torch.bincount(pair_expert, minlength=local_experts).to(torch.int64)
    return all_x.index_select(0, token), per_expert, probs, token


def make_inputs(case: Case) -> dict:
    tokens, experts, k = case["tokens"], case["experts"], case["topk"]
    logits = case.randn(tokens, experts, stream="router", dtype=torch.float32)
    top, idx = torch.topk(logits, k, dim=-1)
    return {
        "x": case.randn(tokens, case["hidden"], stream="x"),
        "topk_idx": idx,
        "topk_weights": torch.softmax(top, dim=-1),
        "num_experts": experts,
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden, experts, k = s.world_size, s["tokens"], s["hidden"], s["experts"], s["topk"]
    row = hidden * s.itemsize
    local = experts // n
    hit = 1 - math.comb(experts - local, k) / math.comb(experts, k)
    # Best known: fetch only the remote tokens routed to a local expert (once per token), plus
    # the (small) routing of every token, which the selection needs.
    routing = n * tokens * k * 12
    link = (n - 1) * tokens * hit * row + traffic.all_gather(routing, n)
    pairs = n * tokens * k / n
    hbm = tokens * row + n * tokens * hit * row + pairs * (row + 12) + routing
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=0.0)


PROBLEM = Problem(
    id=1012,
    slug="moe-allgather-dispatch",
    title="MoE all-gather token dispatcher (Megatron MoEAllGatherTokenDispatcher)",
    description=(
        "Megatron's all-gather dispatcher avoids data-dependent all-to-alls: every rank of the "
        "TPxEP group all-gathers all tokens together with their routing, then keeps and permutes "
        "(expert-major, then global token order) only the rows routed to its local experts; the "
        "combine is the mirror reduce-scatter. It is simple and static but moves world*T*H "
        "elements into every rank although only a fraction is used (here Mixtral routing: 8 "
        "experts, top-2). A fast implementation gathers the small routing first and then pulls "
        "only the needed rows from peers' memory straight into expert-major order, cutting the "
        "traffic to what the all-to-all dispatcher would move while keeping the fixed layout."
    ),
    categories=("expert",),
    source=Source("Megatron-LM",
                  "megatron/core/transformer/moe/token_dispatcher.py: MoEAllGatherTokenDispatcher.token_permutation",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 16, "hidden": 32, "experts": 8, "topk": 2},
           "default": {"tokens": 2048, "hidden": 4096, "experts": 8, "topk": 2}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
)
