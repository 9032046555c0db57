"""Entropy of vocab-sharded logits (verl vocab_parallel_entropy)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(logits: torch.Tensor, *, tp_group: dist.ProcessGroup) -> torch.Tensor:
    """Per-token entropy H = logsumexp(z) - sum_v softmax(z)_v * z_v over the full vocabulary.

    logits [T, V/P] hold this rank's vocab slice. Computed in float32 as max (MAX all-reduce),
    sum of exponentials (SUM) and sum of exp * logit (SUM). Returns [T] float32.
    """
    z = logits.float()
    z_max = z.max(dim=-1, keepdim=True).values
    dist.all_reduce(z_max, op=dist.ReduceOp.MAX, group=tp_group)
    exp = (z - z_max).exp()
    sum_exp = exp.sum(dim=-1, keepdim=True)
    dist.all_reduce(sum_exp, op=dist.ReduceOp.SUM, group=tp_group)
    softmax = exp / sum_exp
    expected_logit = (softmax * z).sum(dim=-1, keepdim=True)
    dist.all_reduce(expected_logit, op=dist.ReduceOp.SUM, group=tp_group)
    return (z_max + sum_exp.log() - expected_logit).squeeze(-1)


def make_inputs(case: Case) -> dict:
    tokens, vocab = case["tokens"], case["vocab"]
    return {"logits": case.randn(tokens, vocab // case.world_size, stream="logits", std=3.0)}


def roofline(s: Setting) -> Traffic:
    n, tokens, vocab = s.world_size, s["tokens"], s["vocab"]
    # One exchange of per-token (max, sum-exp, sum exp*z) partials.
    link = traffic.all_gather(n * tokens * 12, n)
    hbm = tokens * vocab // n * s.itemsize + tokens * 4
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=5.0 * tokens * vocab / n)


PROBLEM = Problem(
    id=607,
    slug="vocab-parallel-entropy",
    title="Entropy of vocab-sharded logits (RL entropy bonus / monitoring)",
    description=(
        "RL trainers such as verl report (and optionally regularise with) the policy entropy of "
        "every response token. With a Megatron tensor-parallel LM head the logits are split by "
        "vocabulary, so verl's vocab_parallel_entropy computes it from three all-reduces over "
        "the tensor-parallel group: the per-token max, the sum of exponentials and the "
        "softmax-weighted sum of logits, after which H = max + log(sum-exp) - E[z]. Each "
        "all-reduce is only T floats but they are serialised and the reference sweeps the "
        "[T, V/P] slice three times with float32 temporaries; an online single-pass kernel can "
        "keep (max, sum-exp, sum exp*z) as a rescaled triple and exchange it once."
    ),
    categories=("vocab", "tensor"),
    source=Source("verl", "verl/utils/megatron/tensor_parallel.py: vocab_parallel_entropy (_VocabParallelEntropy.forward)",
                  "https://github.com/volcengine/verl"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 16, "vocab": 256},
           "default": {"tokens": 4096, "vocab": 151936}},
    tolerances=tolerances(bfloat16=(1e-4, 1e-4), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"tp_group": [list(range(world_size))]},
)
