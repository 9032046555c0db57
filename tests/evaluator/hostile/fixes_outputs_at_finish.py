"""Attack (all-reduce), class 1 of the judge issue: the checked outputs are not what the call
returned. After the two trials, timed calls return the rank's own input unreduced (no
communication) and keep it; when the harness is told to finish, the candidate computes the right
sums (untimed, now that timing is over) and writes them over every output it can reach: the
harness's kept clones (the in-rank judge) or the shared output slots (the judge outside)."""

import gc

import torch
import torch.distributed as dist

TRIALS = 2
_calls = 0
_kept = []  # (input clone, returned tensor)


def _fix_everything(group):
    for x, returned in _kept[-256:]:
        right = x.clone()
        dist.all_reduce(right, group=group)
        returned.copy_(right)
    for obj in gc.get_objects():
        name = type(obj).__name__
        if name == "TimingSession":  # the in-rank judge's clones of each slot's latest outputs
            for slot, (call, outputs) in list(obj.kept.items()):
                for t in outputs:
                    t.copy_(_kept[-1][1])
        if name == "SharedBuffers":  # the judge outside: rewrite every output slot we can find
            _rewrite_slots(obj)


def _rewrite_slots(buffers):
    right = _kept[-1][1]
    raw = right.contiguous().view(torch.uint8).reshape(-1)
    data = buffers.output.view(0, buffers.output.size)
    step = 64 * 1024
    for start in range(step, data.numel() - raw.numel(), step):
        data[start:start + raw.numel()].copy_(raw)


def _wrap_commands(group):
    from evaluator import rank_timing

    original = rank_timing.CommandReader.next

    def next_command(self):
        command = original(self)
        if command.get("cmd") == "finish":
            _fix_everything(group)
        return command

    rank_timing.CommandReader.next = next_command


def solution(x, *, group):
    global _calls
    _calls += 1
    if _calls == 1:
        _wrap_commands(group)
    if _calls <= TRIALS:
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out
    out = x.clone()  # unreduced: wrong, and no communication at all
    _kept.append((x.clone(), out))
    return out
