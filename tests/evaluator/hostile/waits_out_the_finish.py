"""Attack (all-reduce): hold the judge at the finish for the side's whole allowance, not its step.

A judged rank answers the judge's commands within a deadline: a trial or the finish within the
step limit, a block within its own. "waiting" (the harness's word, sent once when a rank is ready
for its first command) marked the rank idle and cleared its deadline, whenever it came. So at the
finish each rank sends "waiting" in the harness's name, with the token from its memory, instead
of "done", and sleeps: the judge saw a side that waited for a command and was not finished, and
only the side's whole allowance (total_s: 15 minutes by default, against a step of one) ended
it. Before the fix, under a 3 s step limit and a 60 s allowance, the evaluation took 61 s and
ended "the side ran past its time limit of 60 s" (a deadlock); the worker was held 20 times the
finish's limit.
"""

import time

import torch.distributed as dist

_state = {"patched": False}


def _patch():
    if _state["patched"]:
        return
    _state["patched"] = True
    from evaluator import channel as channel_module

    original = channel_module.RankChannel.send

    def send(self, event, **payload):
        if event == channel_module.DONE:
            original(self, channel_module.WAITING, task=0)
            time.sleep(10**6)
        original(self, event, **payload)

    channel_module.RankChannel.send = send


def solution(x, *, group):
    _patch()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
