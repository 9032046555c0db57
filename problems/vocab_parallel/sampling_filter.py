"""What NeMo-RL's log-probs "with sampling" share: the top-k/top-p filter over the whole
vocabulary, the all-to-alls between vocab-parallel and token-parallel layouts, and the inputs.

Not a problem itself (no PROBLEM); the registry skips it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Setting, Traffic

TARGET_BOOST = 8.0  # added to each sampled token's logit; see make_sampling_inputs


def top_k_top_p(logits: torch.Tensor, top_k: int, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits [T, V] with every token outside the top-k and the top-p nucleus set to -inf,
    and the keep mask. As in vLLM's sampler (and NeMo-RL's apply_top_k_top_p): ascending sort,
    keep logits >= the k-th largest, then drop the low tail whose cumulative probability is at
    most 1 - top_p, always keeping the largest token."""
    ordered, order = logits.sort(dim=-1, stable=True)
    vocab = logits.shape[-1]
    keep = ordered >= ordered[:, vocab - min(top_k, vocab): vocab - min(top_k, vocab) + 1]
    ordered = ordered.masked_fill(~keep, float("-inf"))
    cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
    nucleus = cumulative > 1 - top_p
    nucleus[:, -1] = True
    keep = keep & nucleus
    ordered = ordered.masked_fill(~keep, float("-inf"))
    filtered = torch.empty_like(ordered).scatter_(-1, order, ordered)
    return filtered, torch.empty_like(keep).scatter_(-1, order, keep)


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
    logits = case.randn(batch, seq, part, stream="logits", std=2.0)
    target = case.randint(0, vocab, batch, seq, stream="target", shared=True)
    # The targets were sampled from the filtered distribution, so they lie inside it: the rank
    # that owns each target's slice raises its logit well above the rest.
    own = (target >= start) & (target < start + part)
    local = (target - start).clamp(0, part - 1)
    boost = own.to(logits.dtype) * TARGET_BOOST
    logits = logits.scatter_add(-1, local.unsqueeze(-1), boost.unsqueeze(-1))
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
