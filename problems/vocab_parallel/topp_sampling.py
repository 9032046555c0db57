"""Top-p (nucleus) sampling from vocab-sharded logits with given random numbers."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor,
              uniform: torch.Tensor, *, tp_group: dist.ProcessGroup):
    """Nucleus sampling of one token per request; the vocabulary is split across the group.

    logits [B, V/P] hold vocab ids [rank*V/P, (rank+1)*V/P); temperature [B] (> 0), top_p [B] in
    (0, 1] and uniform [B] in [0, 1) are float32 and the same on every rank. Tokens are ranked by
    logit (ties: lower global id first); probs = softmax(logit / temperature) over the whole
    vocabulary in float64; the nucleus keeps a token if the probability mass ranked before it is
    <= top_p (the first token is always kept); the draw is the first nucleus position whose
    cumulative probability exceeds uniform * nucleus mass. Returns sampled [B] int64 (global id)
    and nucleus_size [B] int64.
    """
    world = dist.get_world_size(tp_group)
    batch, part = logits.shape
    # The serving path: gather the full logits, then sample.
    gathered = logits.new_empty((world * batch, part))
    dist.all_gather_into_tensor(gathered, logits.contiguous(), group=tp_group)
    full = gathered.view(world, batch, part).permute(1, 0, 2).reshape(batch, world * part)

    sorted_logits, order = torch.sort(full, dim=-1, descending=True, stable=True)
    probs = torch.softmax(sorted_logits.double() / temperature.double().unsqueeze(-1), dim=-1)
    cum = probs.cumsum(-1)
    keep = (cum - probs) <= top_p.double().unsqueeze(-1)
    keep[:, 0] = True
    nucleus = keep.sum(-1)
    kept = torch.where(keep, probs, torch.zeros_like(probs)).cumsum(-1)
    threshold = uniform.double().unsqueeze(-1) * kept.gather(1, (nucleus - 1).unsqueeze(-1))
    choice = (kept <= threshold).sum(-1).clamp(max=nucleus - 1)
    sampled = order.gather(1, choice.unsqueeze(-1)).squeeze(-1)
    return sampled, nucleus


def make_inputs(case: Case) -> dict:
    batch, vocab = case["batch"], case["vocab"]
    return {
        "logits": case.randn(batch, vocab // case.world_size, stream="logits", std=4.0),
        "temperature": case.rand(batch, stream="temperature", shared=True, dtype=torch.float32,
                                 low=0.5, high=1.5),
        "top_p": case.rand(batch, stream="top_p", shared=True, dtype=torch.float32,
                           low=0.5, high=0.99),
        "uniform": case.rand(batch, stream="uniform", shared=True, dtype=torch.float32),
    }


def roofline(s: Setting) -> Traffic:
    n, batch, vocab = s.world_size, s["batch"], s["vocab"]
    # Best known: no logits leave the rank; the nucleus threshold is found by a few rounds of
    # per-row partial-mass all-reduces (about 32 rounds of B doubles) plus the final owner pick.
    link = 32 * traffic.all_reduce(batch * 8, n)
    hbm = batch * vocab // n * s.itemsize + batch * 28
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=4.0 * batch * vocab / n)


PROBLEM = Problem(
    id=606,
    slug="vocab-parallel-topp-sampling",
    title="Top-p (nucleus) sampling with vocab-sharded logits (given random numbers)",
    description=(
        "Nucleus sampling as serving and RL-rollout engines run it after a tensor-parallel LM "
        "head: the logits of each request are split over the vocabulary, and the reference does "
        "what the engines do, all-gather the full [B, V] logits (gather_from_tensor_model_parallel"
        "_region in Megatron inference), sort, apply temperature, keep the smallest prefix whose "
        "mass reaches top_p and draw from it with the supplied uniform number (float64 "
        "probabilities and a fixed tie rule make the draw reproducible). Gathering the logits "
        "and sorting a 128K-entry row per request every step is expensive at decode time; a "
        "fast version never "
        "gathers the vocabulary: it exchanges per-rank statistics (max, sum-exp, masses above "
        "candidate thresholds) to locate the nucleus cut and lets the owning rank resolve the "
        "draw."
    ),
    categories=("vocab", "tensor"),
    source=Source("Megatron-LM",
                  "megatron/core/inference/text_generation_controllers/text_generation_controller.py: "
                  "TextGenerationController.sample_from_logits (top-p filtering; also vLLM "
                  "vllm/v1/sample/ops/topk_topp_sampler.py: apply_top_k_top_p)",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 8, "vocab": 256},
           "default": {"batch": 64, "vocab": 128256}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    process_groups=lambda world_size: {"tp_group": [list(range(world_size))]},
    tags=("inference", "latency"),
)
