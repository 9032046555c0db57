"""Attack (all-reduce, the in-rank judge: the GPUs' default, `--cpu-judge ranks` on CPU): make the
evaluating parent keep gigabytes of "steps".

Judged in the ranks, a candidate's progress steps are taken as the harness sends them (the judge
outside refuses them: floods_valid_messages), and the parent keeps each step's label for its
diagnoses, up to 4096 labels a rank, each as long as the line that carried it (up to 1 MiB). In its
first call each rank sends, with the channel's token from its memory, 3000 steps of half a MiB,
each a new label. Before the fix (sandbox on, 2026-11-29) the evaluating parent's peak resident
memory was 3,299 MiB (293 MiB after it), and the wrong candidate was then judged
(value_mismatch); 4096 labels of 1 MiB per rank of eight are 32 GiB, past this host. A label now
keeps 40 characters of its task and 200 of its step (launcher.MAX_LABEL_CHARS)."""

import gc

_sent = {"done": False}
STEPS = 3000
STEP_CHARS = 512 * 1024


def _channel():
    return next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)


def solution(x, *, group):
    channel = _channel()
    if channel is not None and not _sent["done"]:
        _sent["done"] = True
        filler = "s" * STEP_CHARS
        for i in range(STEPS):
            channel.send("step", task=0, step=f"{i}:{filler}")
    return x.clone()  # its own share only: wrong on every call
