"""Vocab-parallel cross-entropy forward + backward (Megatron _VocabParallelCrossEntropy)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(logits: torch.Tensor, target: torch.Tensor, grad_loss: torch.Tensor, *,
              tp_group: dist.ProcessGroup):
    """Loss and the gradient of the rank's logits slice, as one training step computes them.

    logits [T, V/P] is this rank's vocab slice [rank*V/P, (rank+1)*V/P); target [T] global ids;
    grad_loss [T] float32 is the upstream gradient of each token's loss. Returns loss [T]
    float32 and grad_logits [T, V/P] = (softmax(z) - onehot(target)) * grad_loss, computed in
    float32 and cast to the logits dtype.
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

    exp = z.exp()
    sum_exp = exp.sum(dim=-1)
    dist.all_reduce(sum_exp, op=dist.ReduceOp.SUM, group=tp_group)
    loss = torch.log(sum_exp) - predicted

    # Backward (saved softmax): subtract 1 at the target on the owning rank, scale by grad.
    grad = exp / sum_exp.unsqueeze(-1)
    rows = torch.arange(grad.shape[0], device=grad.device)
    grad[rows, local] -= (~outside).float()
    grad = grad * grad_loss.unsqueeze(-1)
    return loss, grad.to(logits.dtype)


def make_inputs(case: Case) -> dict:
    tokens, vocab = case["tokens"], case["vocab"]
    return {
        "logits": case.randn(tokens, vocab // case.world_size, stream="logits", std=2.0),
        "target": case.randint(0, vocab, tokens, stream="target", shared=True),
        "grad_loss": case.rand(tokens, stream="grad_loss", shared=True, dtype=torch.float32,
                               low=0.5, high=1.5),
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, vocab = s.world_size, s["tokens"], s["vocab"]
    link = traffic.all_gather(n * tokens * 12, n)
    shard = tokens * vocab // n * s.itemsize
    return Traffic(link_bytes=link, hbm_bytes=2 * shard + tokens * 16,
                   flops=6.0 * tokens * vocab / n)


PROBLEM = Problem(
    id=602,
    slug="vocab-parallel-cross-entropy-backward",
    title="Vocab-parallel cross-entropy forward + backward (logits-shard gradient)",
    description=(
        "The training-step version of the vocab-parallel loss: Megatron's "
        "_VocabParallelCrossEntropy saves the softmax of the rank's logits slice in the forward "
        "(after the MAX and two SUM all-reduces over the tensor-parallel group) and the backward "
        "turns it into the gradient (softmax - onehot(target)) * dloss, subtracting 1 only on "
        "the rank that owns the target id. The gradient is as large as the logits, [T, V/P], so "
        "besides the three latency-bound all-reduces the cost is memory traffic; the fast path "
        "fuses forward and backward into two streaming passes (statistics, then gradient) with "
        "one combined exchange of per-token partials in between, never storing the float32 "
        "softmax."
    ),
    categories=("vocab", "tensor"),
    source=Source("Megatron-LM",
                  "megatron/core/tensor_parallel/cross_entropy.py: _VocabParallelCrossEntropy.forward/backward",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 16, "vocab": 256},
           "default": {"tokens": 4096, "vocab": 128256}},
    # Softmax entries are ~1/V: a tiny atol so the gradient is checked relatively.
    tolerances=tolerances(bfloat16=(1e-7, 1e-2), float32=(1e-9, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"tp_group": [list(range(world_size))]},
    tags=("backward",),
)
