"""Megatron per-token loss: all-reduce of gradients and token counts, then 1/num_tokens scaling."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(grad_buffer: torch.Tensor, token_losses: torch.Tensor, lengths: torch.Tensor, *,
              group: dist.ProcessGroup):
    # Loss function: sums (not means) over this rank's valid tokens, with the token count.
    seq = token_losses.shape[1]
    mask = (torch.arange(seq, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)).float()
    stats = torch.stack([(token_losses * mask).sum(), mask.sum()])
    # Gradients were accumulated from summed losses: plain sum across data-parallel ranks.
    grads = grad_buffer.clone()
    dist.all_reduce(grads, op=dist.ReduceOp.SUM, group=group)
    # finalize_model_grads: all-reduce the token count, divide every gradient by it.
    dist.all_reduce(stats, op=dist.ReduceOp.SUM, group=group)
    grads.mul_((1.0 / stats[1]).to(grads.dtype))
    # The logged loss: global token-weighted mean.
    return grads, (stats[0] / stats[1]).reshape(1)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    rows, seq = case["sequences"], case["seq_len"]
    return {
        # Summed-loss gradients grow with the token count; this std keeps the scaled result O(1).
        "grad_buffer": case.randn(case["numel"], stream="g", std=rows * seq / 2),
        "token_losses": case.rand(rows, seq, stream="loss", dtype=torch.float32, low=0.5, high=6.0),
        # Variable-length sequences: the number of valid tokens differs per rank.
        "lengths": case.randint(1, seq + 1, rows, stream="len"),
    }


def roofline(s: Setting) -> Traffic:
    nbytes = s["numel"] * s.itemsize
    tok = s["sequences"] * s["seq_len"]
    return Traffic(link_bytes=traffic.all_reduce(nbytes, s.world_size),
                   hbm_bytes=2 * nbytes + 4 * tok + 8 * s["sequences"],
                   flops=(s.world_size + 1) * s["numel"] + 2 * tok)


PROBLEM = Problem(
    id=208,
    slug="per-token-loss-grad-allreduce",
    title="Per-token loss normalisation: gradient and token-count all-reduce",
    description=(
        "With calculate_per_token_loss, Megatron-LM's loss function returns the sum of token "
        "losses and the number of valid tokens instead of a per-rank mean, so that ranks with "
        "many padding tokens do not get over-weighted. The data-parallel gradient all-reduce "
        "then sums (no 1/dp scaling), finalize_model_grads all-reduces the token count and "
        "scales every gradient by 1/total_tokens, and the logged loss is the global "
        "token-weighted mean. The extra scaling pass over a 64 MiB gradient buffer and the "
        "dependent scalar all-reduce after the big one are pure overhead; a fast kernel "
        "exchanges the count first (or alongside) and applies the scale while writing the "
        "reduced gradient."
    ),
    categories=("data",),
    source=Source("Megatron-LM",
                  "megatron/core/distributed/finalize_model_grads.py: finalize_model_grads",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 4096 + 8, "sequences": 4, "seq_len": 16},
           "default": {"numel": 32 * 2**20, "sequences": 8, "seq_len": 8192}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("backward",),
)
