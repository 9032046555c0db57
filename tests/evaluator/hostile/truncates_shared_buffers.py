"""Attack (all-reduce): kill the judge with SIGBUS, through the memory files it shares with the rank.

The judge's input and output buffers are memory files (``evaluator/shared_memory/host.py``:
``memfd_create``, ``ftruncate``, ``mmap``) whose descriptors the rank inherits read-write, with no
seals. The rank may ``ftruncate`` them to nothing: the judge's own mapping of the file then ends
at byte 0, and its next touch of it (here ``check_inputs`` comparing the first trial's inputs
with its copy) is a SIGBUS, which no Python code can catch: the evaluator process dies on the
spot, with no report and no cleanup of its work directory. The rank cloned its input first, so it
never touches the truncated mapping itself; it gives the right answer (any answer would do: it
never gets judged).

Command: .venv/bin/python -m evaluator.cli eval --problem all-reduce \
    --solution tests/evaluator/hostile/truncates_shared_buffers.py --world-size 2 --device cpu --size small

Measured 2026-11-28, sandbox on, three runs: each time the evaluator died of "Bus error" (exit
status 135) ~11 s in, at the first trial, with no report; each left its work directory
(``/dev/shm/pkb-eval-*``) behind. With ``fills_judge_shm.py``'s slot-sized outputs and the
truncation saved for the end of timing, every submission would leave (trials + 64) x world x slot
bytes of host memory in /dev/shm for good (~130 MiB at the small size, tens of GiB at the default).

Fix (tiny): seal the memory files before any rank gets them: ``os.memfd_create(name,
os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)``, ``os.ftruncate``, then ``fcntl.fcntl(fd,
fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)`` in
``shared_memory/host.py`` ``create`` (the rank's ``ftruncate`` then fails with EPERM). A test: a
rank's ftruncate of either buffer must fail, and this file must end in a verdict.
"""

import os

import torch.distributed as dist

_done = False


def _truncate_inputs():
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/memfd:") and "-inputs" in target:
            os.ftruncate(int(fd), 0)


def solution(x, *, group):
    global _done
    out = x.clone()
    if not _done:
        _done = True
        _truncate_inputs()
    dist.all_reduce(out, group=group)
    return out
