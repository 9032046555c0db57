"""Distributed top-k (and greedy) sampling from vocab-sharded logits, with given random numbers."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _sorted_desc(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # Stable descending sort: equal values keep ascending index order.
    return torch.sort(values, dim=-1, descending=True, stable=True)


def reference(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
              uniform: torch.Tensor, max_top_k: int, *, tp_group: dist.ProcessGroup):
    """Per-request top-k sampling (greedy where temperature == 0) over a vocab split by rank.

    logits [B, V/P] hold vocab ids [rank*V/P, (rank+1)*V/P). temperature [B] float32 (0 means
    greedy), top_k [B] int64 in [1, max_top_k] and uniform [B] float32 in [0, 1) are the same on
    every rank. Ranking: larger logit first, ties broken by the lower global token id.
    Sampling for a non-greedy row: over its top_k[b] best tokens, probs = softmax(logit /
    temperature) in float64, pick the first position whose cumulative probability exceeds
    uniform[b] * total. Returns sampled [B] int64 (global ids), topk_ids [B, max_top_k] int64 and
    topk_logits [B, max_top_k] (the logits of those ids, input dtype).
    """
    world = dist.get_world_size(tp_group)
    rank = dist.get_rank(tp_group)
    batch, part = logits.shape

    # Local candidates, then all-gather and a global merge (distributed vocab top-k).
    vals, idx = _sorted_desc(logits)
    vals, idx = vals[:, :max_top_k].contiguous(), idx[:, :max_top_k] + rank * part
    all_vals = vals.new_empty((world * batch, max_top_k))
    dist.all_gather_into_tensor(all_vals, vals, group=tp_group)
    all_idx = idx.new_empty((world * batch, max_top_k))
    dist.all_gather_into_tensor(all_idx, idx.contiguous(), group=tp_group)
    # [world, B, K] -> [B, world*K]: candidates in rank order, so ties keep global id order.
    cand_vals = all_vals.view(world, batch, max_top_k).permute(1, 0, 2).reshape(batch, -1)
    cand_idx = all_idx.view(world, batch, max_top_k).permute(1, 0, 2).reshape(batch, -1)
    top_vals, pos = _sorted_desc(cand_vals)
    top_vals, top_ids = top_vals[:, :max_top_k], cand_idx.gather(1, pos[:, :max_top_k])

    # Sample among the first top_k[b] candidates.
    greedy = temperature == 0
    temp = torch.where(greedy, torch.ones_like(temperature), temperature).double()
    scaled = top_vals.double() / temp.unsqueeze(-1)
    ranks = torch.arange(max_top_k, device=logits.device)
    scaled = scaled.masked_fill(ranks.unsqueeze(0) >= top_k.unsqueeze(-1), float("-inf"))
    cdf = torch.softmax(scaled, dim=-1).cumsum(-1)
    threshold = uniform.double().unsqueeze(-1) * cdf[:, -1:]
    choice = (cdf <= threshold).sum(-1).clamp(max=top_k - 1)
    sampled = top_ids.gather(1, choice.unsqueeze(-1)).squeeze(-1)
    sampled = torch.where(greedy, top_ids[:, 0], sampled)
    return sampled, top_ids, top_vals


def make_inputs(case: Case) -> dict:
    batch, vocab, kmax = case["batch"], case["vocab"], case["max_top_k"]
    temp = case.rand(batch, stream="temperature", shared=True, dtype=torch.float32, high=1.5)
    return {
        "logits": case.randn(batch, vocab // case.world_size, stream="logits", std=3.0),
        "temperature": torch.where(temp < 0.3, torch.zeros_like(temp), temp),
        "top_k": case.randint(1, kmax + 1, batch, stream="top_k", shared=True),
        "uniform": case.rand(batch, stream="uniform", shared=True, dtype=torch.float32),
        "max_top_k": kmax,
    }


def roofline(s: Setting) -> Traffic:
    n, batch, vocab, kmax = s.world_size, s["batch"], s["vocab"], s["max_top_k"]
    link = traffic.all_gather(n * batch * kmax * (s.itemsize + 8), n)
    hbm = batch * vocab // n * s.itemsize + batch * kmax * (8 + s.itemsize) + batch * 24
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=float(batch * vocab // n))


PROBLEM = Problem(
    id=605,
    slug="vocab-parallel-topk-sampling",
    title="Vocab-parallel top-k / greedy sampling (distributed top-k, given random numbers)",
    description=(
        "At every decode step the sampler turns the tensor-parallel logits into one token per "
        "request. Serving engines usually all-gather the full [B, V] logits first; NeMo-RL's "
        "distributed_vocab_topk instead takes each rank's local top-k, all-gathers the (value, "
        "global id) candidates and merges them. This problem does that, then applies the "
        "per-request sampling parameters as vLLM's sampler does: greedy for temperature 0, "
        "otherwise temperature-scaled softmax over the request's top-k and an inverse-CDF draw "
        "with the supplied uniform number (float64 probabilities and a fixed tie rule make it "
        "exactly reproducible). It sits on the critical path of every generated token with "
        "microsecond budgets: a fast kernel fuses the local selection and publishes the "
        "candidates straight into peers' memory for a one-shot merge."
    ),
    categories=("vocab", "tensor"),
    source=Source("NeMo-RL",
                  "nemo_rl/distributed/model_utils.py: distributed_vocab_topk (sampling as in vLLM "
                  "vllm/v1/sample/sampler.py: Sampler.sample)",
                  "https://github.com/NVIDIA-NeMo/RL"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 8, "vocab": 256, "max_top_k": 8},
           "default": {"batch": 128, "vocab": 128256, "max_top_k": 64}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    process_groups=lambda world_size: {"tp_group": [list(range(world_size))]},
    tags=("inference", "latency"),
)
