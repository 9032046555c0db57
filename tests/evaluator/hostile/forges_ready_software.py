"""Attack (all-reduce): say "ready" again, in the harness's name, from inside a trial. The
channel's token is in this process's memory, and a judged candidate's "ready" was taken at any
time: the last one is what the report's `software` is read from. Its `software` here is a
string where the harness sends a mapping: before the fix, building the report raised (`dict()` of
a string) and the evaluation ended with a traceback instead of a verdict on its wrong answers."""

import gc


def _channel():
    return next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)


def solution(x, *, group):
    channel = _channel()
    if channel is not None:
        channel.send("ready", step="startup", compile_s=float("nan"), software="not a mapping")
    return x.clone()  # its own share only: wrong on every call
