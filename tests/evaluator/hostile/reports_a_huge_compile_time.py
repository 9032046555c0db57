"""Attack (all-reduce): say "ready" again, in the harness's name, with a compile time that is a
whole number of 400 digits. The channel's token is in this process's memory; the report's
compile time is read from the ranks' words where the judge timed no build (evaluator/api.py,
build_seconds), which kept any int or float that `math.isfinite` called finite. A whole number
past a float's range is neither: `math.isfinite` raised OverflowError while the report was built,
and a candidate that returns wrong answers ended with a traceback, no verdict."""

import gc


def _channel():
    return next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)


def solution(x, *, group):
    channel = _channel()
    if channel is not None:
        channel.send("ready", step="startup", compile_s=10**400, software={})
    return x.clone()  # its own share only: wrong on every call
