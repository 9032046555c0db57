"""Attack (all-reduce), class 3: the harness's code runs in this interpreter, so replace it. After
the trials, every call skips the work and the replaced output writer (or output keeper) hands
back the last trial's answer; the replaced alignment skips the barrier, and the copy count says 1."""

import torch.distributed as dist

TRIALS = 2
_calls = 0
_last = []


def _patch():
    from evaluator import rank_runner, rank_timing

    rank_runner.TaskRunner.align = lambda self: None
    rank_timing.copy_count = lambda *args, **kwargs: 1
    try:
        from evaluator.shim import buffers
    except ImportError:
        return
    original = buffers.SharedBuffers.write_outputs

    def write_outputs(self, outputs, slot, capacity):
        return original(self, _last[-1:] or outputs, slot, capacity)

    buffers.SharedBuffers.write_outputs = write_outputs


def solution(x, *, group):
    global _calls
    _calls += 1
    if _calls == 1:
        _patch()
    if _calls <= TRIALS:
        out = x.clone()
        dist.all_reduce(out, group=group)
        _last[:] = [out.clone()]
        return out
    return x.clone()
