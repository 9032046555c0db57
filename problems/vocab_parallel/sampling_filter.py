"""What NeMo-RL's log-probs "with sampling" share: the top-k/top-p filter over the whole
vocabulary, the all-to-alls between vocab-parallel and token-parallel layouts, and the inputs.

Not a problem itself (no PROBLEM); the registry skips it.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Setting, Traffic

LOGIT_STD = 2.0
TARGET_LEAD = 1.0  # each sampled token's logit over the largest of the rest; see make_sampling_inputs

# How far rounding can move an honest filter's cumulative mass. The mass is float32 whatever the
# logits' dtype (vLLM's sampler filters float32 logits; NeMo-RL upcasts before its log-softmax),
# and an honest kernel may sum it from either end. Measured against float64 near the cut, over
# 16384 rows of top-50 logits: float32 either way up to 2^-22 (bf16 sums: up to 2^-7.4 from the
# top, which is why the mass is not summed in bf16: no judge could then tell a bf16-rounded
# output from an honest one). 2^-18 leaves 16x for other orders and tree sums.
TOP_P_MARGIN = 2.0 ** -18


def top_k_top_p(logits: torch.Tensor, top_k: int, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits [T, V] with every token outside the top-k and the top-p nucleus set to -inf,
    and the keep mask. As in vLLM's sampler (and NeMo-RL's apply_top_k_top_p): ascending sort,
    keep logits >= the k-th largest, then drop the low tail whose cumulative probability (float32)
    is at most 1 - top_p, always keeping the largest token. Tied logits at the cut go lowest
    vocabulary id first (the stable sort)."""
    ordered, order = logits.sort(dim=-1, stable=True)
    vocab = logits.shape[-1]
    keep = ordered >= ordered[:, vocab - min(top_k, vocab): vocab - min(top_k, vocab) + 1]
    ordered = ordered.masked_fill(~keep, float("-inf"))
    cumulative = ordered.float().softmax(dim=-1).cumsum(dim=-1)
    nucleus = cumulative > 1 - top_p
    nucleus[:, -1] = True
    keep = keep & nucleus
    ordered = ordered.masked_fill(~keep, float("-inf"))
    filtered = torch.empty_like(ordered).scatter_(-1, order, ordered)
    return filtered, torch.empty_like(keep).scatter_(-1, order, keep)


def top_p_band(inputs: dict[str, object]) -> list[dict[str, object]]:
    """``Problem.decision_band`` of the top-p filters: top_p moved by the margin each way. Top-k
    needs none: it compares logits with the k-th largest, exactly, ties kept."""
    top_p = float(inputs["top_p"])  # type: ignore[arg-type]
    return [dict(inputs, top_p=moved) for moved in (top_p - TOP_P_MARGIN, min(top_p + TOP_P_MARGIN, 1.0))]


def vocab_to_tokens(logits: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """[T, V/P] vocab slice of every token -> [T/P, V] whole vocabulary of this rank's tokens."""
    world = dist.get_world_size(group)
    tokens, part = logits.shape
    recv = torch.empty((world, tokens // world, part), dtype=logits.dtype, device=logits.device)
    dist.all_to_all_single(recv, logits.contiguous(), group=group)
    return recv.permute(1, 0, 2).reshape(tokens // world, world * part)


def tokens_to_vocab(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """The inverse: [T/P, V] of this rank's tokens -> [T, V/P] this rank's vocab slice of all."""
    world = dist.get_world_size(group)
    local, vocab = x.shape
    send = x.reshape(local, world, vocab // world).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv.reshape(world * local, vocab // world)


def make_sampling_inputs(case: Case) -> dict[str, object]:
    batch, seq, vocab = case["batch"], case["seq"], case["vocab"]
    part = vocab // case.world_size
    start = case.rank * part
    logits = case.randn(batch, seq, part, stream="logits", std=LOGIT_STD)
    target = case.randint(0, vocab, batch, seq, stream="target", shared=True)
    # The targets were sampled from the filtered distribution, so they lie inside it: the rank
    # that owns each target's slice sets its logit TARGET_LEAD above the larger of its slice's
    # largest and the expected largest of the whole vocabulary (std * sqrt(2 ln V)). That makes it
    # one of the most likely tokens, never on the top-p boundary, where whether it is kept would
    # hang on rounding and on the order of tied logits (the boundary's other tokens are the
    # judge's decision band, Problem.decision_band), and leaves it well short of top_p alone
    # (about a third of the mass at the default size, three quarters at the small one).
    own = (target >= start) & (target < start + part)
    local = (target - start).clamp(0, part - 1).unsqueeze(-1)
    expected_max = LOGIT_STD * math.sqrt(2 * math.log(vocab))
    lead = logits.amax(dim=-1, keepdim=True).clamp_min(expected_max) + TARGET_LEAD
    logits = logits.scatter(-1, local, torch.where(own.unsqueeze(-1), lead, logits.gather(-1, local)))
    return {"logits": logits, "target": target, "top_k": case["top_k"], "top_p": case["top_p"]}


def sampling_traffic(s: Setting, backward: bool = False) -> Traffic:
    n, tokens, vocab = s.world_size, s["batch"] * s["seq"], s["vocab"]
    shard = tokens * vocab // n * s.itemsize
    link = traffic.all_to_all(shard, n)
    hbm = shard + tokens * 4
    if backward:  # the fp32 gradient travels back and is written in the vocab layout
        link += traffic.all_to_all(tokens * vocab // n * 4, n)
        hbm += tokens * vocab // n * 4
    else:
        link += traffic.all_gather(tokens * 4, n)
    # Filtering is a selection over V per token; count the softmax and the comparisons.
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=5.0 * tokens * vocab / n)
