"""Backward of NeMo-RL's chunked log-probs with top-k/top-p, back into the vocab-parallel layout."""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Source, tolerances
from problems.vocab_parallel.sampling_filter import (
    make_sampling_inputs, sampling_traffic, tokens_to_vocab, top_k_top_p, top_p_band,
    vocab_to_tokens)


def reference(logits: torch.Tensor, target: torch.Tensor, grad_output: torch.Tensor, top_k: int,
              top_p: float, chunk_size: int, *, tp_group: dist.ProcessGroup) -> torch.Tensor:
    # logits [B, S, V/P] and target [B, S] as in the forward; grad_output [B, S] float32, the
    # loss gradient for each token's log-probability (the same on every rank). Returns the
    # gradient for this rank's logits [B, S, V/P] float32: for each token,
    # g * (onehot(target) - softmax(filtered)) on the kept tokens, zero on the filtered ones
    # (the filter's choice is not differentiated).
    world, rank = dist.get_world_size(tp_group), dist.get_rank(tp_group)
    batch, seq, part = logits.shape
    pieces = []
    for begin in range(0, seq, chunk_size):
        chunk = logits[:, begin: begin + chunk_size].reshape(-1, part)
        tokens = chunk.shape[0]
        mine = slice(rank * (tokens // world), (rank + 1) * (tokens // world))
        # The forward's exchange and filter are recomputed, not stored.
        filtered, keep = top_k_top_p(vocab_to_tokens(chunk, tp_group), top_k, top_p)
        grad = -filtered.float().softmax(dim=-1)
        local = target[:, begin: begin + chunk_size].reshape(-1)[mine]
        rows = torch.arange(local.shape[0], device=local.device)
        grad[rows, local] += 1.0
        grad = grad * grad_output[:, begin: begin + chunk_size].reshape(-1)[mine].unsqueeze(-1)
        grad = grad * keep
        pieces.append(tokens_to_vocab(grad, tp_group).reshape(batch, -1, part))
    return torch.cat(pieces, dim=1)


def make_inputs(case: Case) -> dict[str, object]:
    inputs = make_sampling_inputs(case)
    grad = case.randn(case["batch"], case["seq"], stream="grad_output", shared=True,
                      dtype=torch.float32)
    return {**inputs, "grad_output": grad, "chunk_size": case["chunk_size"]}


PROBLEM = Problem(
    id=610,
    slug="vocab-parallel-logprobs-top-k-top-p-backward",
    title="Backward of chunked token log-probs under top-k/top-p, vocab-sharded (NeMo-RL)",
    description=(
        "The policy-gradient loss flows back through NeMo-RL's "
        "ChunkedDistributedLogprobWithSampling: for each chunk of sequence positions the "
        "backward repeats the forward's all-to-all of vocab-parallel logits into token-parallel "
        "full-vocabulary rows and its top-k/top-p filter, forms the float32 gradient "
        "g * (onehot(target) - softmax) on the kept tokens, and all-to-alls it back so that "
        "every rank gets the gradient of its own vocabulary slice for all tokens. Which tokens "
        "get a gradient is the filter's choice, so its tie rule is part of the problem: among "
        "tied logits at the top-p cut the lowest vocabulary id is dropped first (a stable "
        "ascending sort, as in the forward). It moves the "
        "logits one way and a float32 gradient of the same shape the other (twice the bytes at "
        "bf16), chunk after chunk; a fast version overlaps the return exchange of one chunk "
        "with the filter of the next and writes gradients straight into peers' buffers."
    ),
    categories=("vocab",),
    source=Source("NeMo-RL", "nemo_rl/distributed/model_utils.py: "
                  "ChunkedDistributedLogprobWithSampling.backward",
                  "https://github.com/NVIDIA-NeMo/RL"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 2, "seq": 12, "vocab": 96, "top_k": 20, "top_p": 0.9,
                     "chunk_size": 4},
           "default": {"batch": 1, "seq": 4096, "vocab": 131072, "top_k": 50, "top_p": 0.95,
                       "chunk_size": 1024}},
    tolerances=tolerances(bfloat16=(1e-5, 1e-3), float32=(1e-6, 1e-5)),
    traffic=functools.partial(sampling_traffic, backward=True),
    process_groups=lambda world: {"tp_group": [list(range(world))]},
    tags=("rl", "backward"),
    decision_band=top_p_band,
    pkb_ids=(84,),
)
