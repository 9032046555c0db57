"""Attack (all-reduce): wrong and fast in timed calls, right where it is checked. Timed calls
return the rank's own input unreduced (no communication at all) and keep a reference to it. The
harness keeps a clone of each slot's latest outputs and saves the ones the parent picks when it
says ``finish``; the candidate wraps that save, so that once the choice is made the right sums
are computed (untimed) and written over the clones before they reach the disk."""

import sys

import torch.distributed as dist

from evaluator import rank_runner

_timed_inputs = {}  # timed call number -> (input, group)


def solution(x, *, group):
    if sys._getframe(2).f_code.co_name != "timed_call":
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out
    _timed_inputs[len(_timed_inputs)] = (x, group)
    return x.clone()


_save_kept = rank_runner.TaskRunner.save_kept


def _save_right_answers(self, session, command):
    for call, outputs in session.kept.values():
        x, group = _timed_inputs[call]
        right = x.clone()
        dist.all_reduce(right, group=group)
        outputs[0].copy_(right)
    _save_kept(self, session, command)


rank_runner.TaskRunner.save_kept = _save_right_answers
