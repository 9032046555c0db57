"""Attack (all-reduce): run kernel work of the candidate's side while the reference is timed.

The freeze is SIGSTOP (sandbox/watch.py ``freeze_everyone``): a stopped process runs no code of
its own, but a stopped process still *dies* when its own POSIX timer fires with SIGKILL
(``timer_create(SIGEV_SIGNAL, SIGKILL)``, armed before the freeze: SIGKILL is the one signal
that wakes a stopped task), and a process's death is work, done by the dying task in the kernel
(``exit_mmap`` tearing down its memory map). So: at import (start-up is untimed) each rank starts
helper processes, each holding ~64,000 VMAs (one big mapping, every other page mprotected;
no resident memory, nothing the memory watch counts) and costing ~15-30 ms of kernel time to
tear down. At the end of a candidate block that is followed by the reference's (the ABBA
schedule is deterministic, see floods_status_pipe.py), the rank tells a few helpers an absolute
CLOCK_MONOTONIC time some ms ahead; each arms its SIGKILL timer for then, and is frozen with the
side. The timers fire while the reference is timed: the teardowns take a core from it. The
candidate's calls are honest; a helper that finds its time already past (it was frozen before
it could arm) does not arm, so no teardown lands on the candidate's own clock.
"""

import hashlib
import mmap
import os
import signal
import struct
import subprocess
import sys
import time

import torch
import torch.distributed as dist

HELPERS = 36  # per rank
PER_ROUND = 4  # helpers killed per rank after each candidate block followed by the reference's
DELAYS_MS = (8, 25, 55, 70)  # the first two in the reference's block after ours, the others in its next

HELPER = r"""
import ctypes, os, signal, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
class sigevent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int), ("pad", ctypes.c_int * 12)]
class timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]
class itimerspec(ctypes.Structure):
    _fields_ = [("interval", timespec), ("value", timespec)]
N = 32000
base = libc.mmap(None, N * 2 * 4096, 3, 0x22, -1, 0)
for i in range(N):
    libc.mprotect(base + 2 * i * 4096, 4096, 1)
ev = sigevent(); ev.signo = signal.SIGKILL; ev.notify = 0
timer = ctypes.c_void_p()
libc.timer_create(1, ctypes.byref(ev), ctypes.byref(timer))
fd = int(sys.argv[1])
os.write(int(sys.argv[2]), b"r")
while True:
    data = os.read(fd, 8)
    if len(data) < 8:
        os._exit(0)
    when = struct.unpack("<q", data)[0]
    if time.monotonic_ns() > when - 3_000_000:
        continue  # too late: frozen since the rank asked; dying now would be on our own clock
    spec = itimerspec(); spec.value.sec, spec.value.nsec = divmod(when, 1_000_000_000)
    libc.timer_settime(timer, 1, ctypes.byref(spec), None)  # TIMER_ABSTIME, CLOCK_MONOTONIC
"""

_state = {"called": 0, "prev_id": None, "prev_calls": None, "patched": False, "flags": None,
          "continued": False, "helpers": [], "next": 0}


def _start_helpers():
    ready_r, ready_w = os.pipe()
    for _ in range(HELPERS):
        r, w = os.pipe()
        subprocess.Popen([sys.executable, "-I", "-c", HELPER, str(r), str(ready_w)], pass_fds=(r, ready_w),
                         stdin=subprocess.DEVNULL)
        os.close(r)
        _state["helpers"].append(w)
    os.close(ready_w)
    got = 0
    while got < HELPERS:
        chunk = os.read(ready_r, HELPERS)
        if not chunk:
            break
        got += len(chunk)


def _flags():
    if _state["flags"] is None:
        name = "/dev/shm/pkb-die-" + hashlib.sha256(sys.argv[1].encode()).hexdigest()[:16]
        fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, 4096)
        _state["flags"] = mmap.mmap(fd, 4096)
    return _state["flags"]


def _both_answered(block, rank):
    flags = _flags()
    flags[rank * 8:rank * 8 + 8] = int(block).to_bytes(8, "little")
    deadline = time.monotonic() + 0.05
    while time.monotonic() < deadline:
        if int.from_bytes(flags[(1 - rank) * 8:(1 - rank) * 8 + 8], "little") == block:
            return True
    return False


def _patch():
    if _state["patched"]:
        return
    _state["patched"] = True
    from evaluator import channel as channel_module

    original = channel_module.RankChannel.send

    def send(self, event, **payload):
        if event == channel_module.TIMES:
            _state["continued"] = False
        original(self, event, **payload)
        if event == channel_module.CALLED:
            _state["called"] += 1
        elif event == channel_module.TIMES:
            calls, block = _state["called"] + 1, payload.get("block")
            _state["called"] = 0
            prev_id, prev_calls = _state["prev_id"], _state["prev_calls"]
            _state["prev_id"], _state["prev_calls"] = block, calls
            round_zero = calls >= 10 and calls & (calls - 1) != 0 and calls != prev_calls
            even_round = calls >= 10 and calls == prev_calls and prev_id == block - 1
            if isinstance(block, int) and (round_zero or even_round) and _both_answered(block, self._rank) \
                    and not _state["continued"]:
                now = time.monotonic_ns()
                for delay in DELAYS_MS[:PER_ROUND]:
                    if _state["next"] >= len(_state["helpers"]):
                        break
                    os.write(_state["helpers"][_state["next"]], struct.pack("<q", now + delay * 1_000_000))
                    _state["next"] += 1

    channel_module.RankChannel.send = send
    signal.signal(signal.SIGCONT, lambda *_: _state.__setitem__("continued", True))


_start_helpers()


def solution(x, *, group):
    _patch()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
