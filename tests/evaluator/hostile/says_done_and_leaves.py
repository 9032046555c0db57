"""Attack (all-reduce): leave in the middle of the judge's command, as a rank that has finished
everything leaves. The channel's token is in this process's memory: in its first call each rank
says "done" in the harness's name and exits with status 0, the harness's own last words. Before
the fix the judge took both ranks for finished, stopped checking the side's deadlines, and waited
for an answer to its command that no process was left to give: no verdict, ever."""

import gc
import os
import sys

import torch.distributed as dist


def _channel():
    return next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)


def solution(x, *, group):
    channel = _channel()
    if channel is not None:
        dist.barrier(group=group)  # both ranks leave together: neither sees its peer vanish
        channel.send("done")
        sys.stdout.flush()
        os._exit(0)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
