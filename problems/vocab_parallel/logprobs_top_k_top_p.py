"""NeMo-RL log-probs with top-k/top-p from vocab-parallel logits (DistributedLogprobWithSampling)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Problem, Source, tolerances
from problems.vocab_parallel.sampling_filter import (
    make_sampling_inputs, sampling_traffic, top_k_top_p, top_p_band, vocab_to_tokens)


def reference(logits: torch.Tensor, target: torch.Tensor, top_k: int, top_p: float, *,
              tp_group: dist.ProcessGroup) -> torch.Tensor:
    # logits [B, S, V/P]: this rank's vocab slice; target [B, S] global token ids, the same on
    # every rank. Returns log p(target) [B, S] float32 under the top-k/top-p filtered softmax,
    # on every rank.
    world, rank = dist.get_world_size(tp_group), dist.get_rank(tp_group)
    batch, seq, part = logits.shape
    tokens = batch * seq
    # The filter needs the whole vocabulary of a token: trade vocab slices for token slices.
    mine = vocab_to_tokens(logits.reshape(tokens, part), tp_group)
    filtered, _ = top_k_top_p(mine, top_k, top_p)
    log_probs = filtered.float().log_softmax(dim=-1)
    local = target.reshape(-1)[rank * (tokens // world): (rank + 1) * (tokens // world)]
    picked = log_probs.gather(-1, local.unsqueeze(-1)).squeeze(-1).contiguous()
    out = torch.empty(tokens, dtype=picked.dtype, device=picked.device)
    dist.all_gather_into_tensor(out, picked, group=tp_group)
    return out.reshape(batch, seq)


DESCRIPTION = (
    "GRPO/PPO training must score the sampled tokens under the same distribution the sampler "
    "drew them from; when generation used top-k/top-p, NeMo-RL's DistributedLogprobWithSampling "
    "cannot keep the vocabulary sharded, because the filter ranks every token of the whole "
    "vocabulary. It all-to-alls the vocab-parallel logits into token-parallel rows of the full "
    "vocabulary, applies apply_top_k_top_p (sort, cut at the k-th largest, cut the tail whose "
    "float32 cumulative probability is at most 1 - p), takes the float32 log-softmax, picks each target's "
    "log-probability and all-gathers them. The all-to-all moves the whole logit tensor (hundreds "
    "of MiB for a 128K vocabulary) and the full sort dominates the compute; a fast version finds "
    "the thresholds with a selection instead of a sort and overlaps it with the exchange."
)

PROBLEM = Problem(
    id=608,
    slug="vocab-parallel-logprobs-top-k-top-p",
    title="Token log-probs under top-k/top-p from vocab-sharded logits (NeMo-RL)",
    description=DESCRIPTION,
    categories=("vocab",),
    source=Source("NeMo-RL", "nemo_rl/distributed/model_utils.py: DistributedLogprobWithSampling."
                  "forward (with nemo_rl/algorithms/logits_sampling_utils.py: apply_top_k_top_p)",
                  "https://github.com/NVIDIA-NeMo/RL"),
    collectives=("all_to_all", "all_gather"),
    reference=reference,
    make_inputs=make_sampling_inputs,
    sizes={"small": {"batch": 2, "seq": 8, "vocab": 96, "top_k": 20, "top_p": 0.9},
           "default": {"batch": 2, "seq": 2048, "vocab": 131072, "top_k": 50, "top_p": 0.95}},
    tolerances=tolerances(bfloat16=(1e-2, 1e-2), float32=(1e-5, 1e-5)),
    traffic=sampling_traffic,
    process_groups=lambda world: {"tp_group": [list(range(world))]},
    tags=("rl",),
    decision_band=top_p_band,
    pkb_ids=(82,),
)
