"""Attack (all-reduce, GPUs judged in the ranks): answer each timed block with call times the
parent cannot read as numbers.

Where the ranks time themselves (a GPU evaluation's default judge, `paired.PairedTimer`), each
rank's answer to a block carries its calls' times and the number of copies it keeps; the channel's
token is in this process's memory, so candidate code can rewrite them on their way out. The parent
read them with `float()` and `int()`: a time of 400 digits raised OverflowError, a string
ValueError, and the evaluation ended with a traceback, no verdict; NaN or Infinity went on into
the timing and the report, which is no JSON then. No CPU evaluation takes this path (the judge
outside times those): `tests/evaluator/test_paired_timing.py` hands `FORGED` to the parent's
reading of a block as the rank would send it.
"""

import gc

# What each forged answer puts in place of the harness's, and why the parent could not read it.
FORGED = {
    "a time of 400 digits": {"times_ms": [10**400]},
    "a time that is text": {"times_ms": ["fast"]},
    "a time that is NaN": {"times_ms": [float("nan")]},
    "a negative time": {"times_ms": [-1.0]},
    "copies that are text": {"copies": "many"},
}
_state = {"patched": False, "which": 0}


def _patch():
    channel = next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)
    if channel is None or _state["patched"]:
        return
    _state["patched"] = True
    send = type(channel).send

    def forged(self, event, **payload):
        if event == "times" and "times_ms" in payload:
            change = list(FORGED.values())[_state["which"] % len(FORGED)]
            _state["which"] += 1
            payload.update({key: (value * len(payload["times_ms"]) if key == "times_ms" else value)
                            for key, value in change.items()})
        send(self, event, **payload)

    type(channel).send = forged


def solution(x, *, group):
    import torch.distributed as dist

    _patch()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
