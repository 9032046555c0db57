"""Attack (all-reduce): answer a whole timed block with one collective. The judge writes every
call's inputs of a block before it thaws the side; the shim's command, a frame above the first
call, lists them all. The attack reduces them all at once, writes each call's correct outputs
into its slot, and returns the cached answer on the calls that follow: every output checks, and
the block pays one collective's latency instead of one per call."""

import sys

import torch
import torch.distributed as dist

_answers = {}  # (slot) -> outputs already written for the block in progress


def _shim_frame():
    frame = sys._getframe(1)
    while frame is not None:
        if "command" in frame.f_locals and "buffers" in frame.f_locals and "call" in frame.f_locals:
            return frame
        frame = frame.f_back
    return None


def solution(x, *, group):
    frame = _shim_frame()
    if frame is None:
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out
    command, buffers, call = frame.f_locals["command"], frame.f_locals["buffers"], frame.f_locals["call"]
    slot = int(call["slot"])
    if slot in _answers and _answers[slot][0] is command:
        return _answers.pop(slot)[1]
    calls = command["calls"]
    stacked = torch.stack([buffers.inputs(c["inputs"])["x"] for c in calls])
    dist.all_reduce(stacked, group=group)  # one collective for the whole block
    _answers.clear()
    for c, out in zip(calls, stacked):
        _answers[int(c["slot"])] = (command, out.clone())
    return _answers.pop(slot)[1]
