"""Attack (all-reduce): answer the parent's timed-block command before the harness does, with call
times of a microsecond each. The channel's token is in this process's memory (the channel object
holds it), and the block's number and length are in the harness's frame above the solution."""

import gc
import sys

import torch.distributed as dist

_answered = set()


def _channel():
    return next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)


def _block_command():
    frame = sys._getframe(1)
    while frame is not None:
        command = frame.f_locals.get("command")
        if isinstance(command, dict) and command.get("cmd") in ("block", "calls"):
            return command, frame.f_locals.get("session")
        frame = frame.f_back
    return None, None


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    command, session = _block_command()
    channel = _channel()
    if command is not None and channel is not None and command["block"] not in _answered:
        _answered.add(command["block"])
        calls = command["calls"] if isinstance(command["calls"], int) else len(command["calls"])
        first = session.calls if session is not None else 0
        channel.send("times", task=0, block=command["block"], first_call=first,
                     times_ms=[0.001] * calls, gap_ms=[0.0] * calls, copies=2)
    return out
