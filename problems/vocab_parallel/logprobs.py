"""Log-probabilities of given tokens from vocab-sharded logits (NeMo-RL from_parallel_logits_to_logprobs)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(logits: torch.Tensor, input_ids: torch.Tensor, *,
              tp_group: dist.ProcessGroup) -> torch.Tensor:
    """logprob[b, s] = log_softmax(z[b, s])[input_ids[b, s + 1]] for s < S-1.

    logits [B, S, V/P] hold this rank's vocab slice [rank*V/P, (rank+1)*V/P) of the policy's
    next-token logits; input_ids [B, S] are the sequences (global ids, same on every rank).
    The targets are the inputs shifted left by one. Float32 throughout; returns [B, S-1] float32.
    """
    rank = dist.get_rank(tp_group)
    part = logits.shape[-1]
    start = rank * part
    target = input_ids.roll(shifts=-1, dims=-1)

    z = logits.float()
    z_max = z.amax(dim=-1, keepdim=True)
    dist.all_reduce(z_max, op=dist.ReduceOp.MAX, group=tp_group)
    z = z - z_max
    sum_exp = z.exp().sum(dim=-1, keepdim=True)
    dist.all_reduce(sum_exp, op=dist.ReduceOp.SUM, group=tp_group)
    log_probs = z - sum_exp.log()

    outside = (target < start) | (target >= start + part)
    local = torch.where(outside, torch.zeros_like(target), target - start)
    picked = log_probs.gather(-1, local.unsqueeze(-1)).squeeze(-1)
    picked = torch.where(outside, torch.zeros_like(picked), picked)
    dist.all_reduce(picked, op=dist.ReduceOp.SUM, group=tp_group)
    return picked[:, :-1].contiguous()


def make_inputs(case: Case) -> dict:
    batch, seq, vocab = case["batch"], case["seq"], case["vocab"]
    return {
        "logits": case.randn(batch, seq, vocab // case.world_size, stream="logits", std=2.0),
        "input_ids": case.randint(0, vocab, batch, seq, stream="input_ids", shared=True),
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, vocab = s.world_size, s["batch"] * s["seq"], s["vocab"]
    link = traffic.all_gather(n * tokens * 12, n)
    hbm = tokens * vocab // n * s.itemsize + tokens * (8 + 4)
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=3.0 * tokens * vocab / n)


PROBLEM = Problem(
    id=603,
    slug="vocab-parallel-logprobs",
    title="Token log-probs from vocab-sharded logits (RL policy / reference log-probs)",
    description=(
        "RL post-training (GRPO/PPO) scores every generated sequence with the policy and the "
        "reference model to get per-token log-probabilities of the sampled tokens. NeMo-RL's "
        "from_parallel_logits_to_logprobs does it on tensor-parallel logits without gathering "
        "the vocabulary: shift the token ids left by one, take a distributed log-softmax (MAX "
        "and SUM all-reduces of per-token statistics), pick the target's log-prob on the rank "
        "that owns it and SUM-all-reduce it. The reference materialises the float32 log-softmax "
        "of the whole [B, S, V/P] slice, which dominates memory and time for 150K-vocabulary "
        "models; a fast kernel streams the logits once, keeps only per-token (max, sum-exp, "
        "target logit) and exchanges them in one round."
    ),
    categories=("vocab", "tensor"),
    source=Source("NeMo-RL",
                  "nemo_rl/distributed/model_utils.py: from_parallel_logits_to_logprobs (DistributedLogprob.forward)",
                  "https://github.com/NVIDIA-NeMo/RL"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 2, "seq": 8, "vocab": 256},
           "default": {"batch": 2, "seq": 2048, "vocab": 151936}},
    tolerances=tolerances(bfloat16=(1e-4, 1e-4), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"tp_group": [list(range(world_size))]},
)
