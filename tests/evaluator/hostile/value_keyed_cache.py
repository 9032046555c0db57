"""Attack (all-reduce): remember each result under the values of its input and answer repeated
inputs from memory, skipping the all-reduce. When timed calls reused a few input sets this was
right on every call and 15x "faster". To make a hit visible to the judge, a hit here returns a
wrong answer: it must never happen on a checked call."""

import torch
import torch.distributed as dist

_memory = {}


def solution(x, *, group):
    key = x.flatten()[:64].float().cpu().numpy().tobytes()
    if key in _memory:
        return _memory[key] * 0 + 42
    out = x.clone()
    dist.all_reduce(out, group=group)
    _memory[key] = out
    return out
