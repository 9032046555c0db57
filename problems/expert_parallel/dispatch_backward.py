"""Backward of MoE all-to-all dispatch: expert-major grads back to tokens (Megatron)."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(grad_recv_x: torch.Tensor, grad_recv_probs: torch.Tensor, topk_idx: torch.Tensor,
              num_experts: int, *, group: dist.ProcessGroup):
    """Gradient of the dispatch: send each received row's gradient home and sum per token.

    Forward layout (Megatron token_permutation with several local experts): rows on the expert
    rank ordered by local expert, then source rank, then source token index. Only the first R
    rows of ``grad_recv_x`` / ``grad_recv_probs`` are used (R = pairs this rank received; the
    buffers are sized for the worst case). Returns grad_x [T, H] (sum over the k copies of a
    token, float32 accumulation over j = 0..k-1, cast to the input dtype) and grad_probs [T, k]
    float32 (the gradient of each routed probability, routed back unchanged).
    """
    world = dist.get_world_size(group)
    tokens, k = topk_idx.shape
    local_experts = num_experts // world
    hidden = grad_recv_x.shape[1]

    flat_expert = topk_idx.reshape(-1)
    order = torch.argsort(flat_expert * tokens + torch.arange(tokens * k, device=topk_idx.device) // k)
    counts = torch.bincount(flat_expert, minlength=num_experts).to(torch.int64)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=group)
    m = recv_counts.view(world, local_experts)                   # [source rank, local expert]
    received = int(m.sum())

    # Undo the sort by local expert: chunks (l, s) -> (s, l)  (restore_output_by_local_experts).
    sizes_lm = m.t().reshape(-1).tolist()
    gx = grad_recv_x[:received].split(sizes_lm, 0)
    gp = grad_recv_probs[:received].split(sizes_lm, 0)
    src_major = [l * world + s for s in range(world) for l in range(local_experts)]
    send_x = torch.cat([gx[i] for i in src_major], 0)
    send_p = torch.cat([gp[i] for i in src_major], 0)

    out_splits = m.sum(1).tolist()
    back_splits = counts.view(world, local_experts).sum(1).tolist()
    back_x = grad_recv_x.new_empty((tokens * k, hidden))
    dist.all_to_all_single(back_x, send_x, back_splits, out_splits, group=group)
    back_p = grad_recv_probs.new_empty((tokens * k,))
    dist.all_to_all_single(back_p, send_p, back_splits, out_splits, group=group)

    # Unpermute: row i belongs to pair order[i] = (token, slot).
    pair_x = torch.empty_like(back_x)
    pair_x[order] = back_x
    pair_p = torch.empty_like(back_p)
    pair_p[order] = back_p
    grad_x = pair_x.view(tokens, k, hidden).float().sum(dim=1).to(grad_recv_x.dtype)
    return grad_x, pair_p.view(tokens, k)


def make_inputs(case: Case) -> dict:
    tokens, experts, k, n = case["tokens"], case["experts"], case["topk"], case.world_size
    logits = case.randn(tokens, experts, stream="router", dtype=torch.float32)
    _, idx = torch.topk(logits, k, dim=-1)
    capacity = n * tokens * min(k, experts // n)
    return {
        "grad_recv_x": case.randn(capacity, case["hidden"], stream="grad_recv_x"),
        "grad_recv_probs": case.randn(capacity, stream="grad_recv_probs", dtype=torch.float32),
        "topk_idx": idx,
        "num_experts": experts,
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden, experts, k = s.world_size, s["tokens"], s["hidden"], s["experts"], s["topk"]
    row = hidden * s.itemsize
    local = experts // n
    remote = (n - 1) * (1 - math.comb(experts - local, k) / math.comb(experts, k))
    # Best known: the expert rank pre-sums a token's local-expert gradients, one row per
    # distinct remote rank crosses the links (plus k float32 prob grads).
    link = tokens * remote * row + tokens * k * 4 * (n - 1) / n
    hbm = tokens * k * (row + 4) + tokens * row + tokens * k * 12
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=float(tokens * k * hidden))


PROBLEM = Problem(
    id=1008,
    slug="moe-dispatch-backward",
    title="Backward of MoE all-to-all dispatch (expert-major grads -> token grads)",
    description=(
        "In training, the gradient of the dispatch is a combine: the gradients of the permuted "
        "rows, laid out by local expert for the grouped GEMM, are reordered back to (source rank, "
        "local expert) chunks, sent home with the reverse uneven all-to-all, and the k copies of "
        "each token are summed (no router weights: in Megatron the probabilities travel as a "
        "separate permuted tensor whose gradient is routed back unchanged). This is what "
        "autograd runs for MoEAlltoAllTokenDispatcher.token_permutation (sort_chunks_by_idxs, "
        "all_to_all and permute backward). Same volume as the forward dispatch, on the critical "
        "path of the backward pass; fast kernels pre-reduce on the expert rank and scatter-add "
        "on arrival instead of materialising the permuted copy."
    ),
    categories=("expert",),
    source=Source("Megatron-LM",
                  "megatron/core/transformer/moe/token_dispatcher.py: MoEAlltoAllTokenDispatcher.token_permutation "
                  "(backward through moe_utils.py: permute, sort_chunks_by_idxs)",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 24, "hidden": 32, "experts": 16, "topk": 4},
           "default": {"tokens": 4096, "hidden": 2048, "experts": 64, "topk": 6}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("backward",),
)
