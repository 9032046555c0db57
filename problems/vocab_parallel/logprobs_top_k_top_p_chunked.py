"""NeMo-RL's chunked log-probs with top-k/top-p (ChunkedDistributedLogprobWithSampling.forward)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Source, tolerances
from problems.vocab_parallel.sampling_filter import (
    make_sampling_inputs, sampling_traffic, top_k_top_p, top_p_band, vocab_to_tokens)


def reference(logits: torch.Tensor, target: torch.Tensor, top_k: int, top_p: float,
              chunk_size: int, *, tp_group: dist.ProcessGroup) -> torch.Tensor:
    # As vocab-parallel-logprobs-top-k-top-p, but the sequence is processed chunk_size positions
    # at a time (all batch rows of each), so only one chunk's full-vocabulary float32 logits
    # exist at once. Returns log p(target) [B, S] float32 on every rank.
    world, rank = dist.get_world_size(tp_group), dist.get_rank(tp_group)
    batch, seq, part = logits.shape
    pieces = []
    for begin in range(0, seq, chunk_size):
        chunk = logits[:, begin: begin + chunk_size].reshape(-1, part)
        tokens = chunk.shape[0]
        mine = vocab_to_tokens(chunk, tp_group)
        filtered, _ = top_k_top_p(mine, top_k, top_p)
        log_probs = filtered.float().log_softmax(dim=-1)
        local = target[:, begin: begin + chunk_size].reshape(-1)
        local = local[rank * (tokens // world): (rank + 1) * (tokens // world)]
        picked = log_probs.gather(-1, local.unsqueeze(-1)).squeeze(-1).contiguous()
        out = torch.empty(tokens, dtype=picked.dtype, device=picked.device)
        dist.all_gather_into_tensor(out, picked, group=tp_group)
        pieces.append(out.reshape(batch, -1))
    return torch.cat(pieces, dim=1)


def make_inputs(case: Case) -> dict[str, object]:
    return {**make_sampling_inputs(case), "chunk_size": case["chunk_size"]}


PROBLEM = Problem(
    id=609,
    slug="vocab-parallel-logprobs-top-k-top-p-chunked",
    title="Chunked token log-probs under top-k/top-p from vocab-sharded logits (NeMo-RL)",
    description=(
        "NeMo-RL's ChunkedDistributedLogprobWithSampling is the long-sequence form of "
        "DistributedLogprobWithSampling: materialising the full vocabulary in float32 for every "
        "token of a 16K-token rollout would need tens of GiB, so it walks the sequence in "
        "chunks of logprob_chunk_size positions; each chunk's vocab-parallel logits are "
        "all-to-alled into token-parallel full-vocabulary rows, filtered with top-k/top-p "
        "(the cumulative probability in float32, as in the unchunked problem), "
        "turned into float32 log-probabilities of the sampled tokens and all-gathered. The "
        "chunking turns one large exchange into a sequence of medium ones separated by a sort; "
        "a fast version pipelines them, exchanging the next chunk while filtering this one."
    ),
    categories=("vocab",),
    source=Source("NeMo-RL", "nemo_rl/distributed/model_utils.py: "
                  "ChunkedDistributedLogprobWithSampling.forward",
                  "https://github.com/NVIDIA-NeMo/RL"),
    collectives=("all_to_all", "all_gather"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 2, "seq": 12, "vocab": 96, "top_k": 20, "top_p": 0.9,
                     "chunk_size": 4},
           "default": {"batch": 1, "seq": 8192, "vocab": 131072, "top_k": 50, "top_p": 0.95,
                       "chunk_size": 1024}},
    tolerances=tolerances(bfloat16=(1e-2, 1e-2), float32=(1e-5, 1e-5)),
    traffic=sampling_traffic,
    process_groups=lambda world: {"tp_group": [list(range(world))]},
    tags=("rl",),
    decision_band=top_p_band,
    pkb_ids=(83,),
)
