"""GRPO: group-normalised advantages across DP ranks and clipped policy loss with global token mean."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

CLIP_EPS, ADV_EPS = 0.2, 1e-6


def reference(logprobs: torch.Tensor, old_logprobs: torch.Tensor, rewards: torch.Tensor,
              lengths: torch.Tensor, *, group: dist.ProcessGroup, ):
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    r_local, seq = logprobs.shape
    gsize = GROUP_SIZE[r_local * world < 256]
    # Responses are dealt round-robin: local response i on rank r is global sample i*world + r,
    # and prompt p owns global samples [p * G, (p + 1) * G).
    gathered = torch.empty(world * r_local, dtype=rewards.dtype, device=rewards.device)
    dist.all_gather_into_tensor(gathered, rewards, group=group)
    global_rewards = gathered.view(world, r_local).t().reshape(-1, gsize)
    mean = global_rewards.mean(dim=1, keepdim=True)
    std = global_rewards.std(dim=1, keepdim=True)
    adv_all = ((global_rewards - mean) / (std + ADV_EPS)).reshape(r_local, world)
    adv = adv_all[:, rank].contiguous()
    # PPO-clip surrogate per token.
    mask = (torch.arange(seq, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)).float()
    ratio = torch.exp(logprobs - old_logprobs)
    a = adv.unsqueeze(1)
    pg1 = -a * ratio
    pg2 = -a * ratio.clamp(1 - CLIP_EPS, 1 + CLIP_EPS)
    per_token = torch.maximum(pg1, pg2)
    # Token-mean over the global batch: the valid-token count is all-reduced first.
    tokens = mask.sum().reshape(1)
    dist.all_reduce(tokens, op=dist.ReduceOp.SUM, group=group)
    loss = ((per_token * mask).sum() / tokens).reshape(1)
    dist.all_reduce(loss, op=dist.ReduceOp.SUM, group=group)
    # d loss / d logprobs for this rank's tokens.
    in_range = ((ratio > 1 - CLIP_EPS) & (ratio < 1 + CLIP_EPS)).float()
    active = torch.where(pg1 >= pg2, torch.ones_like(ratio), in_range)
    grad = -a * ratio * active * mask / tokens
    return loss, grad, adv


GROUP_SIZE = {False: 16, True: 4}  # responses per prompt (small preset: 4)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    r_local = case["responses"] // case.world_size
    seq = case["seq_len"]
    f32 = torch.float32
    old = -case.rand(r_local, seq, stream="old", dtype=f32, high=4.0)
    return {
        "logprobs": old + case.randn(r_local, seq, stream="delta", dtype=f32, std=0.15),
        "old_logprobs": old,
        "rewards": case.randn(r_local, stream="reward", dtype=f32),
        "lengths": case.randint(1, seq + 1, r_local, stream="len"),
    }


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    r_local, seq = s["responses"] // n, s["seq_len"]
    tok = r_local * seq
    return Traffic(link_bytes=traffic.all_gather(4 * s["responses"], n) + 2 * traffic.all_reduce(4, n),
                   hbm_bytes=3 * 4 * tok + 12 * r_local, flops=15 * tok)


PROBLEM = Problem(
    id=1307,
    slug="grpo-policy-loss",
    title="GRPO group-normalised advantages and clipped policy loss across DP ranks",
    description=(
        "In GRPO (verl, NeMo-RL) each prompt gets a group of sampled responses whose rewards are "
        "normalised within the group, (r - mean) / (std + eps), to give advantages. After "
        "load-balancing, one prompt's responses are spread over data-parallel ranks (here dealt "
        "round-robin), so the rewards are all-gathered before normalising. The PPO-clip "
        "surrogate max(-A*ratio, -A*clip(ratio)) is then averaged over the valid tokens of the "
        "whole global batch, which needs an all-reduce of the token count, and the gradient "
        "w.r.t. the log-probabilities is formed for the backward. Outputs: global loss, "
        "per-token gradient and the local advantages. The collectives are tiny and latency "
        "bound while the token math is a few streaming passes; a fast kernel fuses the "
        "per-token loss, mask and gradient in one pass and overlaps the scalar exchanges."
    ),
    categories=("other",),
    source=Source("verl", "verl/trainer/ppo/core_algos.py: compute_grpo_outcome_advantage",
                  "https://github.com/volcengine/verl"),
    collectives=("all_gather", "all_reduce"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"responses": 32, "seq_len": 24}, "default": {"responses": 512, "seq_len": 8192}},
    dtypes=(torch.float32,),
    tolerances=tolerances(float32=(1e-9, 1e-4)),
    traffic=roofline,
    tags=("backward",),
)
