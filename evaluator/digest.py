"""A digest of a call's outputs, taken as the call returns and sent to the parent with its block.

The candidate keeps the outputs of timed calls until the parent says which of them it checks,
and candidate code can change a kept copy in that time: compute the right answer, untimed,
once it knows which calls matter (on GPUs; on CPU the judge copies the outputs itself, docs/judge.md, tests/evaluator/hostile/fixes_outputs_at_finish.py). So each
timed call's outputs are digested right after it returns, the digests go to the parent in the
block's answer, and the parent digests the saved files itself: a saved output that is not what
the call returned is a protocol violation. Producing a digest that matches right answers means
producing the right answers within the block, on the parent's clock.

The digest must come out the same on the rank's device and on the parent's CPU, bit for bit: it
is integer arithmetic modulo 2^64 over the output's bytes read as 64-bit words (wrapping
multiplication and addition, which neither the order of a sum nor the device changes), each word
weighted by an odd number drawn from its position. It is not a cryptographic hash: it need not
be, since the candidate cannot know the right answers' digest without computing them.
"""

from __future__ import annotations

from typing import Sequence

import torch

_MIX = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed 64-bit integer
_weights: dict[tuple[int, str], torch.Tensor] = {}


def _position_weights(words: int, device: torch.device) -> torch.Tensor:
    key = (words, str(device))
    weights = _weights.get(key)
    if weights is None:
        positions = torch.arange(words, dtype=torch.int64, device=device)
        weights = (positions * _MIX) | 1  # wraps modulo 2^64; odd, so every word counts
        if len(_weights) > 8:
            _weights.clear()
        _weights[key] = weights
    return weights


class PendingDigest:
    """A call's digests, enqueued on the device as the call returns; read all at once later, so
    that a block pays one synchronisation, not one per call."""

    def __init__(self, outputs: Sequence[torch.Tensor]) -> None:
        self.labels = [f"{str(t.dtype).removeprefix('torch.')}:{','.join(map(str, t.shape))}" for t in outputs]
        self.sums = [_word_sum(t) for t in outputs]

    def values(self) -> list[str]:
        return [f"{int(total) & 0xFFFFFFFFFFFFFFFF:016x}:{label}" for total, label in zip(self.sums, self.labels)]


def resolve(pending: Sequence[PendingDigest]) -> list[list[str]]:
    """Every pending digest's value, with one copy from the device per block."""
    sums = [total for p in pending for total in p.sums]
    if not sums:
        return [p.values() for p in pending]
    host = torch.stack(sums).cpu().tolist()
    out: list[list[str]] = []
    for p in pending:
        p.sums, host = host[:len(p.sums)], host[len(p.sums):]
        out.append(p.values())
    return out


def outputs_digest(outputs: Sequence[torch.Tensor]) -> list[str]:
    """The digest of each output: 16 hex digits over its bytes, then its dtype and shape."""
    return resolve([PendingDigest(outputs)])[0]


def _word_sum(t: torch.Tensor) -> torch.Tensor:
    data = t.detach().contiguous().reshape(-1).view(torch.uint8)
    pad = (-data.numel()) % 8
    if pad:
        data = torch.cat([data, data.new_zeros(pad)])
    words = data.view(torch.int64)
    return (words * _position_weights(words.numel(), words.device)).sum()
