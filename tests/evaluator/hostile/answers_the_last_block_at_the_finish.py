"""Attack (all-reduce): hold the judge at the finish with a second answer to the last block.

The variant of waits_out_the_finish with the other word that cleared a rank's deadline: its
answer to a block ("times"). The judge checked that an answer named the block it had sent last,
and kept a second answer to be reported once that block was over. At the finish the last block
is still the one sent last: each rank answers it again in the harness's name, with the token from
its memory, instead of saying "done", and sleeps. Before the fix, under a 3 s step limit and a
60 s allowance, the evaluation took 61 s and ended a deadlock at the side's whole allowance.
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
            original(self, channel_module.TIMES, task=0, block=_state["block"])
            time.sleep(10**6)
        if event == channel_module.TIMES:
            _state["block"] = payload.get("block")
        original(self, event, **payload)

    channel_module.RankChannel.send = send


def solution(x, *, group):
    _patch()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
