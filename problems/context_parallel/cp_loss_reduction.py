"""Context-parallel language-model loss: local masked cross-entropy, all-reduced sum and count."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(logits: torch.Tensor, labels: torch.Tensor, loss_mask: torch.Tensor, *,
              cp_group: dist.ProcessGroup):
    """logits: [T, V] for this rank's tokens; labels: [T] int64; loss_mask: [T] float32 (0/1).

    Returns (per-token loss [T] float32, masked mean loss over the whole CP sequence as a
    0-dim float32 tensor). The mean is sum(loss * mask) / sum(mask) with both sums reduced
    across the context-parallel group.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    per_token = -logp.gather(1, labels.unsqueeze(1)).squeeze(1)
    mask = loss_mask.float()
    totals = torch.stack([(per_token * mask).sum(), mask.sum()])
    dist.all_reduce(totals, op=dist.ReduceOp.SUM, group=cp_group)
    return per_token, totals[0] / totals[1]


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    t, v = case["tokens_per_rank"], case["vocab"]
    return {"logits": case.randn(t, v, stream="logits", std=2.0),
            "labels": case.randint(0, v, t, stream="labels"),
            "loss_mask": (case.rand(t, stream="mask", dtype=torch.float32) > 0.2).float()}


def roofline(s: Setting) -> Traffic:
    t, v = s["tokens_per_rank"], s["vocab"]
    return Traffic(link_bytes=traffic.all_reduce(8, s.world_size),
                   hbm_bytes=t * v * s.itemsize + t * 16,
                   flops=4 * t * v)


PROBLEM = Problem(
    id=710,
    slug="cp-loss-token-reduction",
    title="Context-parallel LM loss: masked cross-entropy with a CP sum/count all-reduce",
    description=(
        "With context parallelism every rank holds the logits of its slice of each sequence. "
        "Megatron's GPT loss function takes the masked sum of the per-token cross-entropy and "
        "the number of unmasked tokens and all-reduces the pair over the context-parallel group "
        "so that the loss is the true per-token mean of the whole sequence, not a mean of "
        "per-rank means. The all-reduce is 8 bytes, so the cost is one launch-latency-bound "
        "collective after a memory-bound pass over 1 GiB of logits; fast versions fuse the "
        "log-softmax, gather and masked reduction into one read of the logits and finish the "
        "cross-rank sum with a few peer stores instead of an NCCL call."
    ),
    categories=("context",),
    source=Source("Megatron-LM", "pretrain_gpt.py: loss_func", "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens_per_rank": 16, "vocab": 64},
           "default": {"tokens_per_rank": 4096, "vocab": 131072}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-5)),
    traffic=roofline,
    process_groups=lambda world_size: {"cp_group": [list(range(world_size))]},
)
