"""Speculative decoding: greedy verification of draft tokens against vocab-sharded target logits."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(logits_shard: torch.Tensor, draft_token_ids: torch.Tensor, *,
              tp_group: dist.ProcessGroup) -> torch.Tensor:
    """logits_shard: [R * (K+1), V/P] target-model logits for R requests at the K draft
    positions plus the bonus position, rank r holding vocab columns [r V/P, (r+1) V/P);
    draft_token_ids: [R, K] int64 (the same on every rank).

    The logits are gathered over the vocabulary, the target's greedy tokens are the argmax
    (first index on ties), draft token i is accepted while it matches the target token at
    every position up to i; the first mismatch emits the target token and stops. If all K
    match, the bonus token is appended. Returns [R, K+1] int64 with -1 after the last
    emitted token.
    """
    world = dist.get_world_size(tp_group)
    rows, vs = logits_shard.shape
    r, kd = draft_token_ids.shape
    gathered = torch.empty((world * rows, vs), dtype=logits_shard.dtype, device=logits_shard.device)
    dist.all_gather_into_tensor(gathered, logits_shard.contiguous(), group=tp_group)
    logits = gathered.view(world, rows, vs).permute(1, 0, 2).reshape(rows, world * vs)
    target = logits.argmax(dim=-1).view(r, kd + 1)
    match = (target[:, :kd] == draft_token_ids).long()
    accepted = torch.cumprod(match, dim=1).sum(dim=1)  # leading matches, [R]
    pos = torch.arange(kd + 1, device=target.device).unsqueeze(0)
    # Emit accepted drafts (which equal the target tokens) and the target token after them.
    return torch.where(pos <= accepted.unsqueeze(1), target, torch.full_like(target, -1))


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    r, k, v = case["requests"], case["spec_tokens"], case["vocab"]
    p, vs = case.world_size, case["vocab"] // case.world_size
    # The full logits are one shared draw; each rank keeps its vocabulary columns.
    full = case.randn(r * (k + 1), v, stream="logits", shared=True, std=3.0)
    shard = full[:, case.rank * vs:(case.rank + 1) * vs].contiguous()
    # A draft model that agrees with the target about 80% of the time: drafts copy the
    # target's greedy token at their position, else a random token.
    target = full.argmax(dim=-1).view(r, k + 1)[:, :k]
    noise = case.randint(0, v, r, k, stream="draft", shared=True)
    agree = case.rand(r, k, stream="agree", shared=True, dtype=torch.float32) < 0.8
    return {"logits_shard": shard, "draft_token_ids": torch.where(agree, target, noise)}


def roofline(s: Setting) -> Traffic:
    p = s.world_size
    r, k, v = s["requests"], s["spec_tokens"], s["vocab"]
    rows = r * (k + 1)
    # Best algorithm: local max/argmax per row, then all-gather (value, index) pairs.
    return Traffic(link_bytes=traffic.all_gather(p * rows * 8, p),
                   hbm_bytes=rows * (v // p) * s.itemsize + r * (2 * k + 1) * 8,
                   flops=rows * (v // p))


PROBLEM = Problem(
    id=902,
    slug="tp-speculative-greedy-verify",
    title="Speculative decoding: greedy draft verification with vocab-sharded TP logits",
    description=(
        "In speculative decoding the target model scores K draft tokens plus a bonus position "
        "in one step; with tensor parallelism its LM head leaves each rank with a vocabulary "
        "shard of the logits. vLLM gathers the full logits (LogitsProcessor._gather_logits) and "
        "its rejection sampler, in greedy mode, accepts the longest prefix of drafts that agree "
        "with the target argmax and emits the target token at the first disagreement (or the "
        "bonus token). Gathering 128K-wide rows moves tens of MiB per step although each rank only "
        "needs to contribute its local maximum and index: a distributed argmax (8 bytes per row "
        "per rank, ties broken to the lowest index) plus the acceptance scan in one kernel "
        "turns this into a latency-bound exchange of a few KiB."
    ),
    categories=("vocab", "tensor"),
    source=Source("vLLM", "vllm/v1/sample/rejection_sampler.py: rejection_sample (greedy path); "
                  "vllm/model_executor/layers/logits_processor.py: LogitsProcessor._gather_logits",
                  "https://github.com/vllm-project/vllm"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"requests": 4, "spec_tokens": 3, "vocab": 64},
           "default": {"requests": 64, "spec_tokens": 4, "vocab": 131072}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    process_groups=lambda world_size: {"tp_group": [list(range(world_size))]},
    tags=("inference", "latency"),
)
