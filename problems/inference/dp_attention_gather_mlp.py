"""DP-attention decode: gather every DP rank's tokens for a TP-sharded MLP, then scatter back."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _counts(base: int, world: int) -> list[int]:
    # Uneven decode batches: DP ranks hold different numbers of running requests.
    return [base - 4 * (r % 4) for r in range(world)]


def reference(hidden: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor,
              num_tokens: list, *, group: dist.ProcessGroup) -> torch.Tensor:
    """hidden: [n_r, Hd] this DP rank's decode tokens after attention; num_tokens: every
    rank's n (Python ints, known from the batch metadata); w_gate_up: [2 I/P, Hd] and
    w_down: [Hd, I/P] this rank's tensor-parallel shard of the dense MLP.

    dp_gather (SUM_LEN mode): each rank writes its tokens at its offset of a zeroed global
    buffer and an all-reduce assembles all tokens. The TP-sharded MLP runs on all tokens,
    its partial outputs are all-reduced, and dp_scatter keeps this rank's rows.
    Returns [n_r, Hd] in hidden.dtype.
    """
    rank = dist.get_rank(group)
    total = sum(num_tokens)
    start = sum(num_tokens[:rank])
    n = num_tokens[rank]
    buf = torch.zeros((total, hidden.shape[1]), dtype=hidden.dtype, device=hidden.device)
    buf[start:start + n] = hidden
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    inter = w_down.shape[1]
    gate_up = buf.float() @ w_gate_up.float().t()
    act = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
    partial = act @ w_down.float().t()
    dist.all_reduce(partial, op=dist.ReduceOp.SUM, group=group)
    return partial[start:start + n].to(hidden.dtype)


def make_inputs(case: Case) -> dict:
    p = case.world_size
    hd, inter = case["hidden"], case["intermediate"]
    counts = _counts(case["tokens_per_rank"], p)
    return {
        "hidden": case.randn(counts[case.rank], hd, stream="hidden"),
        "w_gate_up": case.randn(2 * inter // p, hd, stream="w13", std=hd ** -0.5),
        "w_down": case.randn(hd, inter // p, stream="w2", std=inter ** -0.5),
        "num_tokens": counts,
    }


def roofline(s: Setting) -> Traffic:
    p = s.world_size
    hd, inter = s["hidden"], s["intermediate"]
    counts = _counts(s["tokens_per_rank"], p)
    total = sum(counts)
    tok = total * hd * s.itemsize
    # Best: all-gather the tokens (v-style) and reduce-scatter the partial outputs by owner.
    link = traffic.all_gather(tok, p) + traffic.reduce_scatter(total * hd * 4, p)
    w_bytes = 3 * (inter // p) * hd * s.itemsize
    return Traffic(link_bytes=link, hbm_bytes=w_bytes + tok + max(counts) * hd * s.itemsize,
                   flops=6 * total * hd * (inter // p))


PROBLEM = Problem(
    id=904,
    slug="dp-attention-gather-mlp-scatter",
    title="DP-attention decode: gather tokens, TP-sharded MLP, scatter back",
    description=(
        "With data-parallel attention (SGLang's DP attention for DeepSeek-style models) every "
        "rank runs attention for its own requests, but the dense MLP is tensor-parallel over all "
        "ranks. dp_gather in SUM_LEN mode copies each rank's tokens to its offset in a zeroed "
        "global buffer and all-reduces it; after the sharded MLP the partial outputs are "
        "all-reduced and dp_scatter keeps the local rows. In decode the batches are a few dozen "
        "uneven token counts, so the two all-reduces of padded buffers are pure latency twice "
        "per layer; a fast version replaces them with a variable-size all-gather and an "
        "owner-directed reduce-scatter written into peers' buffers, overlapped with the GEMMs."
    ),
    categories=("tensor", "data"),
    source=Source("SGLang", "python/sglang/srt/layers/dp_attention.py: _dp_gather_via_all_reduce, "
                  "dp_scatter", "https://github.com/sgl-project/sglang"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens_per_rank": 16, "hidden": 16, "intermediate": 32},
           "default": {"tokens_per_rank": 64, "hidden": 4096, "intermediate": 14336}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    tags=("inference", "latency"),
)
