"""MoE load-balancing (switch) aux loss with tokens-per-expert all-reduced over the sequence group."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

AUX_LOSS_COEFF = 1e-2  # moe_aux_loss_coeff


def reference(logits: torch.Tensor, topk: int, *, tp_cp_group: dist.ProcessGroup):
    """Router top-k, global token counts and the switch aux loss with its logits gradient.

    logits [T, E] float32 are this rank's slice of the sequence (sequence/context parallel).
    probs = softmax(logits); routing = top-k of probs. tokens_per_expert is summed over the
    group; total_tokens = T * group size. Returns
      aux_loss [] float32 = sum_e(sum_t probs[t, e] * tokens_per_expert[e]) * E * coeff / (k * total^2)
        (this rank's share; the shares of the group add up to the full-sequence loss),
      tokens_per_expert [E] int64 (global over the group),
      grad_logits [T, E] float32: d aux_loss / d logits for an upstream gradient of 1.
    """
    group_size = dist.get_world_size(tp_cp_group)
    tokens, experts = logits.shape
    probs = torch.softmax(logits.float(), dim=-1)
    _, idx = torch.topk(probs, topk, dim=-1)
    tokens_per_expert = torch.bincount(idx.reshape(-1), minlength=experts).to(torch.int64)
    dist.all_reduce(tokens_per_expert, op=dist.ReduceOp.SUM, group=tp_cp_group)
    total = tokens * group_size
    scale = experts * AUX_LOSS_COEFF / (topk * total * total)
    counts = tokens_per_expert.float()
    aux_loss = (probs.sum(0) * counts).sum() * scale
    g = counts * scale                                               # d aux / d probs[t, e]
    grad_logits = probs * (g - (probs * g).sum(-1, keepdim=True))
    return aux_loss, tokens_per_expert, grad_logits


def make_inputs(case: Case) -> dict:
    return {
        "logits": case.randn(case["tokens"], case["experts"], stream="logits", dtype=torch.float32),
        "topk": case["topk"],
    }


def roofline(s: Setting) -> Traffic:
    tokens, experts = s["tokens"], s["experts"]
    return Traffic(link_bytes=traffic.all_reduce(experts * 8, s.world_size),
                   hbm_bytes=2 * tokens * experts * 4,
                   flops=8.0 * tokens * experts)


PROBLEM = Problem(
    id=1013,
    slug="moe-aux-loss-seq-allreduce",
    title="MoE switch load-balancing loss with sequence-parallel token counts (+ logits grad)",
    description=(
        "Megatron's TopKRouter adds the Switch-Transformer load-balancing loss: E * sum_e f_e * "
        "P_e, with f_e the fraction of tokens routed to expert e and P_e the mean router "
        "probability. When the sequence is split over tensor/sequence and context parallel "
        "ranks, the token counts must describe the whole sequence, so tokens_per_expert is "
        "all-reduced over the TPxCP group and the token total scaled by its size, while the "
        "probabilities stay local. The all-reduce is tiny (E int64) but it is a synchronisation "
        "point inside every MoE layer's router, between the top-k and the dispatch, forward and "
        "backward; a fast kernel fuses softmax, top-k, counting, a one-shot all-reduce through "
        "peer memory and the loss/gradient into one launch. The router runs in float32 "
        "(moe_router_dtype), so that is the only dtype; the coefficient is 1e-2."
    ),
    categories=("expert",),
    source=Source("Megatron-LM",
                  "megatron/core/transformer/moe/moe_utils.py: switch_load_balancing_loss_func "
                  "(with get_tokens_per_expert_and_token_count, router.py: TopKRouter)",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 32, "experts": 16, "topk": 4},
           "default": {"tokens": 8192, "experts": 128, "topk": 8}},
    # Gradients are O(1e-10) (the loss is divided by total_tokens^2): a tiny atol, relative test.
    tolerances=tolerances(float32=(1e-12, 1e-4)),
    traffic=roofline,
    dtypes=(torch.float32,),
    process_groups=lambda world_size: {"tp_cp_group": [list(range(world_size))]},
    tags=("backward", "latency"),
)
