"""Vocab-parallel cross-entropy forward (Megatron _VocabParallelCrossEntropy)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(logits: torch.Tensor, target: torch.Tensor, *,
              tp_group: dist.ProcessGroup) -> torch.Tensor:
    """Per-token loss log(sum_v exp(z_v)) - z_target over a vocabulary split across the group.

    logits [T, V/P] is this rank's contiguous vocab slice [rank*V/P, (rank+1)*V/P); target [T]
    holds global token ids (the same on every rank). Computed in float32. Returns loss [T] float32.
    """
    rank = dist.get_rank(tp_group)
    part = logits.shape[1]
    start = rank * part
    z = logits.float()
    z_max = z.max(dim=-1).values
    dist.all_reduce(z_max, op=dist.ReduceOp.MAX, group=tp_group)
    z = z - z_max.unsqueeze(-1)

    outside = (target < start) | (target >= start + part)
    local = torch.where(outside, torch.zeros_like(target), target - start)
    predicted = z.gather(1, local.unsqueeze(-1)).squeeze(-1)
    predicted = torch.where(outside, torch.zeros_like(predicted), predicted)
    dist.all_reduce(predicted, op=dist.ReduceOp.SUM, group=tp_group)

    sum_exp = z.exp().sum(dim=-1)
    dist.all_reduce(sum_exp, op=dist.ReduceOp.SUM, group=tp_group)
    return torch.log(sum_exp) - predicted


def make_inputs(case: Case) -> dict:
    tokens, vocab = case["tokens"], case["vocab"]
    return {
        "logits": case.randn(tokens, vocab // case.world_size, stream="logits", std=2.0),
        "target": case.randint(0, vocab, tokens, stream="target", shared=True),
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, vocab = s.world_size, s["tokens"], s["vocab"]
    # Best known: one exchange of per-token (max, sum-exp, target logit) partials, 12 B/token.
    link = traffic.all_gather(n * tokens * 12, n)
    hbm = tokens * vocab // n * s.itemsize + tokens * (8 + 4)
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=3.0 * tokens * vocab / n)


PROBLEM = Problem(
    id=601,
    slug="vocab-parallel-cross-entropy",
    title="Vocab-parallel cross-entropy forward",
    description=(
        "With tensor parallelism the output layer is column-parallel, so each rank holds the "
        "logits of all tokens for its slice of the vocabulary and the loss must be computed "
        "without gathering the [T, V] logits. Megatron's _VocabParallelCrossEntropy does three "
        "all-reduces over the tensor-parallel group: the per-token max (MAX), the target logit "
        "that only the owning rank contributes (SUM) and the sum of exponentials (SUM). The "
        "messages are only T floats each, but three dependent small all-reduces plus three passes "
        "over a [T, V/P] tensor (128K-vocabulary models make it the largest activation of the "
        "step) leave the GPU idle; a fast kernel makes one pass with an online softmax and "
        "exchanges the three partials in one fused peer-memory exchange."
    ),
    categories=("vocab", "tensor"),
    source=Source("Megatron-LM",
                  "megatron/core/tensor_parallel/cross_entropy.py: _VocabParallelCrossEntropy.forward",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 16, "vocab": 256},
           "default": {"tokens": 4096, "vocab": 128256}},
    tolerances=tolerances(bfloat16=(1e-4, 1e-4), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"tp_group": [list(range(world_size))]},
    pkb_ids=(73,),
)
