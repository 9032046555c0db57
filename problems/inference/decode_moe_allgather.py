"""Decode-step MoE with all-gather dispatch and reduce-scatter combine (few tokens per rank)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(hidden: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
              w13: torch.Tensor, w2: torch.Tensor, *, ep_group: dist.ProcessGroup) -> torch.Tensor:
    """hidden: [T, Hd] this rank's decode tokens; topk_ids: [T, k] int64 global expert ids;
    topk_weights: [T, k] float32; w13: [E/P, 2I, Hd] gate and up projections of this rank's
    experts (experts r E/P .. (r+1) E/P - 1); w2: [E/P, Hd, I].

    Dispatch: all-gather tokens and routing from every rank. Each rank applies its local
    experts (SiLU-gated MLP) to the gathered tokens routed to them, weighted by the router
    weights, and a reduce-scatter sums the partial outputs and returns each rank its own
    tokens. Returns [T, Hd] in hidden.dtype.
    """
    rank, world = dist.get_rank(ep_group), dist.get_world_size(ep_group)
    t, hd = hidden.shape
    k = topk_ids.shape[1]
    e_local = w13.shape[0]
    inter = w2.shape[2]
    all_h = torch.empty((world * t, hd), dtype=hidden.dtype, device=hidden.device)
    dist.all_gather_into_tensor(all_h, hidden.contiguous(), group=ep_group)
    all_ids = torch.empty((world * t, k), dtype=topk_ids.dtype, device=topk_ids.device)
    dist.all_gather_into_tensor(all_ids, topk_ids.contiguous(), group=ep_group)
    all_w = torch.empty((world * t, k), dtype=topk_weights.dtype, device=topk_weights.device)
    dist.all_gather_into_tensor(all_w, topk_weights.contiguous(), group=ep_group)
    partial = torch.zeros((world * t, hd), dtype=torch.float32, device=hidden.device)
    for e in range(e_local):
        hit = all_ids == rank * e_local + e  # [N, k], at most one hit per token
        rows = hit.any(dim=1).nonzero().squeeze(1)
        if rows.numel() == 0:
            continue
        weight = (all_w * hit).sum(dim=1).index_select(0, rows)
        x = all_h.index_select(0, rows).float()
        gate_up = x @ w13[e].float().t()
        act = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
        y = (act @ w2[e].float().t()) * weight.unsqueeze(1)
        partial.index_add_(0, rows, y)
    out = torch.empty((t, hd), dtype=torch.float32, device=hidden.device)
    dist.reduce_scatter_tensor(out, partial, group=ep_group)
    return out.to(hidden.dtype)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    p = case.world_size
    t, hd, inter, e, k = (case["tokens_per_rank"], case["hidden"], case["intermediate"],
                          case["experts"], case["topk"])
    scores = case.rand(t, e, stream="router", dtype=torch.float32)
    top_vals, top_ids = scores.topk(k, dim=1)
    return {
        "hidden": case.randn(t, hd, stream="hidden"),
        "topk_ids": top_ids,
        "topk_weights": top_vals / top_vals.sum(dim=1, keepdim=True),
        "w13": case.randn(e // p, 2 * inter, hd, stream="w13", std=hd ** -0.5),
        "w2": case.randn(e // p, hd, inter, stream="w2", std=inter ** -0.5),
    }


def roofline(s: Setting) -> Traffic:
    p = s.world_size
    t, hd, inter, e, k = (s["tokens_per_rank"], s["hidden"], s["intermediate"], s["experts"],
                          s["topk"])
    tok = t * hd * s.itemsize
    route = t * k * 16
    # Best: send each token only to the ranks owning its experts (<= min(k, P-1) copies) and
    # return one partial per (token, rank) pair; bounded by the all-gather volume.
    link = traffic.all_gather(p * (tok + route), p) + traffic.reduce_scatter(p * t * hd * 4, p)
    e_local = e // p
    # Each local expert's weights are read once if it receives any token.
    w_bytes = e_local * 3 * inter * hd * s.itemsize
    routed = p * t * k / p  # tokens reaching this rank's experts on average
    return Traffic(link_bytes=link, hbm_bytes=w_bytes + p * tok + tok,
                   flops=routed * 6 * hd * inter)


PROBLEM = Problem(
    id=903,
    slug="decode-moe-allgather-dispatch",
    title="Decode-step MoE: all-gather dispatch, local experts, reduce-scatter combine",
    description=(
        "During decode each data-parallel attention rank holds only a few dozen tokens, and "
        "vLLM's simplest expert-parallel path (the all-gather / reduce-scatter all2all manager) "
        "gathers every rank's tokens and router outputs, lets each rank run its local experts on "
        "the tokens routed to them, and reduce-scatters the weighted partial outputs back to "
        "the token owners. Messages are a few hundred KiB, so each MoE layer of every decode "
        "step pays two collective latencies on the critical path; fast kernels send each token "
        "only to the ranks that own its experts (DeepEP low-latency style), run grouped GEMMs "
        "over the local experts, and write the weighted results straight back to the owner."
    ),
    categories=("expert",),
    source=Source("vLLM", "vllm/distributed/device_communicators/all2all.py: "
                  "AgRsAll2AllManager.dispatch / combine", "https://github.com/vllm-project/vllm"),
    collectives=("all_gather", "reduce_scatter"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens_per_rank": 4, "hidden": 16, "intermediate": 8, "experts": 8,
                     "topk": 2},
           "default": {"tokens_per_rank": 64, "hidden": 2048, "intermediate": 768,
                       "experts": 128, "topk": 8}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"ep_group": [list(range(world_size))]},
    tags=("inference", "latency"),
)
