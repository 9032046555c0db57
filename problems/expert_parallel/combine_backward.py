"""Backward of MoE combine: weighted token grads out to expert ranks + router-prob grads."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(grad_out: torch.Tensor, expert_y: torch.Tensor, topk_idx: torch.Tensor,
              topk_weights: torch.Tensor, num_experts: int, *, group: dist.ProcessGroup):
    """Gradient of out[t] = sum_j w[t, j] * y[t, j] through the combine all-to-all.

    ``expert_y`` [T, k, H] are the expert outputs that came back in the forward combine, saved
    per (token, slot). Returns
      grad_expert_out [R, H]: w[t, j] * grad_out[t] (computed in float32, cast to the input
        dtype) delivered to the expert rank, ordered by local expert, then source rank, then
        source token index (the layout the grouped GEMM produced in the forward);
      grad_weights [T, k] float32: <grad_out[t], y[t, j]> accumulated in float32.
    """
    world = dist.get_world_size(group)
    tokens, k = topk_idx.shape
    local_experts = num_experts // world
    hidden = grad_out.shape[1]

    grad_weights = (grad_out.float().unsqueeze(1) * expert_y.float()).sum(-1)
    grad_pairs = (topk_weights.float().unsqueeze(-1) * grad_out.float().unsqueeze(1)).to(grad_out.dtype)

    flat_expert = topk_idx.reshape(-1)
    order = torch.argsort(flat_expert * tokens + torch.arange(tokens * k, device=topk_idx.device) // k)
    send = grad_pairs.reshape(tokens * k, hidden)[order]
    counts = torch.bincount(flat_expert, minlength=num_experts).to(torch.int64)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=group)
    m = recv_counts.view(world, local_experts)                   # [source rank, local expert]
    in_splits = counts.view(world, local_experts).sum(1).tolist()
    out_splits = m.sum(1).tolist()
    got = grad_out.new_empty((int(m.sum()), hidden))
    dist.all_to_all_single(got, send, out_splits, in_splits, group=group)

    # Sort the received chunks (s, l) by local expert: (l, s)  (sort_input_by_local_experts).
    chunks = got.split(m.reshape(-1).tolist(), 0)
    expert_major = [s * local_experts + l for l in range(local_experts) for s in range(world)]
    return torch.cat([chunks[i] for i in expert_major], 0), grad_weights


def make_inputs(case: Case) -> dict:
    tokens, experts, k, hidden = case["tokens"], case["experts"], case["topk"], case["hidden"]
    logits = case.randn(tokens, experts, stream="router", dtype=torch.float32)
    weights, idx = torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
    return {
        "grad_out": case.randn(tokens, hidden, stream="grad_out"),
        "expert_y": case.randn(tokens, k, hidden, stream="expert_y"),
        "topk_idx": idx,
        "topk_weights": weights / weights.sum(-1, keepdim=True),
        "num_experts": experts,
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden, experts, k = s.world_size, s["tokens"], s["hidden"], s["experts"], s["topk"]
    row = hidden * s.itemsize
    local = experts // n
    remote = (n - 1) * (1 - math.comb(experts - local, k) / math.comb(experts, k))
    # Best known: send grad_out once per distinct remote rank plus the k weights; the expert
    # rank scales by w on arrival.
    link = tokens * remote * (row + 12 * k)
    hbm = tokens * row + tokens * k * row + tokens * k * row + tokens * k * 16
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=4.0 * tokens * k * hidden)


PROBLEM = Problem(
    id=1009,
    slug="moe-combine-backward",
    title="Backward of MoE combine (token grads -> expert ranks, router-weight grads)",
    description=(
        "Autograd through Megatron's token_unpermutation: the forward multiplied the k returned "
        "expert outputs of each token by its router probabilities and summed them, so the "
        "backward computes the probability gradients locally as dot products of the output "
        "gradient with the saved expert outputs, scales the output gradient by each "
        "probability, permutes the T*k rows by expert and sends them to the expert ranks with "
        "the dispatch-direction uneven all-to-all, where they are sorted by local expert for the "
        "grouped GEMM backward. The all-to-all carries T*k*H elements per rank; a fast kernel "
        "sends each token's gradient row once per destination rank with its k weights and "
        "expands/scales it on the receiver, overlapping with the dot products."
    ),
    categories=("expert",),
    source=Source("Megatron-LM",
                  "megatron/core/transformer/moe/token_dispatcher.py: MoEAlltoAllTokenDispatcher.token_unpermutation "
                  "(backward through moe_utils.py: unpermute)",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 24, "hidden": 32, "experts": 16, "topk": 4},
           "default": {"tokens": 4096, "hidden": 2048, "experts": 64, "topk": 6}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-5)),
    traffic=roofline,
    tags=("backward",),
)
