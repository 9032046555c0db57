"""Attack (all-reduce): end the evaluation with no verdict at all, by crashing the judge's parser.

The judge reads each rank's status pipe and parses every line with ``json.loads``, catching
``ValueError`` only (``channel.parse_lines``). A line of 100,000 ``[`` is not a ValueError in
CPython's decoder: it raises ``RecursionError`` (a RuntimeError), which nothing in
``SideRun._read`` / ``poll`` / ``Judge.run_calls`` / ``api._run_judged`` catches. The pipe needs
no token: the line is parsed before any token is looked at. A candidate that would fail (here:
wrong answers on purpose) gets no report, only a crashed evaluator (the worker posts
"no-report"), and can do it at will, e.g. only when it knows it would lose.
"""

import sys

import torch
import torch.distributed as dist

_done = []


def solution(x, *, group):
    if not _done:
        _done.append(1)
        import os

        os.write(int(sys.argv[3]), b"[" * 100_000 + b"\n")  # the status pipe (rank_main's argv)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out * 1.5  # wrong on purpose: this candidate would fail
