"""Attack (all-reduce): run beside the reference's blocks under the judge's margin.

Around each reference block the judge reads the stopped candidate's threads' run times, and 1 ms
or more was its protocol_violation: less passed, as a margin for a reading taken as a thread
finished stopping. Every reading of honest runs here was 0 ns (348 of them, sandbox on and off).
What a woken process can do in under a ms is small on a processor, but not on a GPU: a launch is
microseconds, and the kernel then runs beside the reference on its GPU. So rank 0 starts a helper;
after a candidate block that the reference's follows (the ABBA schedule is deterministic, see
dies_while_frozen.py), the rank tells it a time 8 ms ahead (past the judge's reads after the
block, whose every ns counts); the helper arms a one-shot SIGCONT timer for then, is frozen with
the side, runs 0.5 ms when continued (a stand-in for a launch), and waits again. Before the fix
it passed unseen (3 runs of 3).
"""

import os
import struct
import subprocess
import sys
import time

import torch.distributed as dist

DELAY_MS = 8

HELPER = r"""
import ctypes, os, signal, struct, sys, time
commands = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
event = ctypes.create_string_buffer(64)
struct.pack_into("qii", event, 0, 0, signal.SIGCONT, 0)  # SIGEV_SIGNAL to the process
timer = ctypes.c_void_p()
libc.timer_create(1, event, ctypes.byref(timer))
due = [None]

def on_continue(*_):
    if due[0] is None or time.monotonic_ns() < due[0]:
        return
    due[0] = None
    end = time.thread_time() + 0.0005
    while time.thread_time() < end:
        pass

signal.signal(signal.SIGCONT, on_continue)
os.write(int(sys.argv[2]), b"r")
while True:
    data = os.read(commands, 8)
    if len(data) < 8:
        os._exit(0)
    due[0] = struct.unpack("<q", data)[0]
    libc.timer_settime(timer, 1, ctypes.create_string_buffer(struct.pack("qqqq", 0, 0, *divmod(due[0], 10**9))), None)
"""

_state = {"called": 0, "prev_id": None, "patched": False, "to_helper": None}

if sys.argv[2] == "0":  # the rank (evaluator/rank_main.py)
    _ready, _ready_w = os.pipe()
    _commands, _state["to_helper"] = os.pipe()
    _helper = subprocess.Popen([sys.executable, "-S", "-c", HELPER, str(_commands), str(_ready_w)],
                               pass_fds=(_commands, _ready_w))
    os.close(_ready_w)
    os.close(_commands)
    os.read(_ready, 1)


def _patch():
    if _state["patched"] or _state["to_helper"] is None:
        return
    _state["patched"] = True
    from evaluator import channel as channel_module

    original = channel_module.RankChannel.send

    def send(self, event, **payload):
        if event == channel_module.TIMES:
            calls, block = _state["called"] + 1, payload.get("block")
            prev_id = _state["prev_id"]
            _state["called"], _state["prev_id"] = 0, block
            # C C: this block opens an even round, and the reference's block comes next (warm-up
            # blocks double from 1 call; a round's have at least 10).
            if isinstance(block, int) and prev_id == block - 1 and calls >= 10 and calls & (calls - 1):
                os.write(_state["to_helper"], struct.pack("<q", time.monotonic_ns() + DELAY_MS * 1_000_000))
        original(self, event, **payload)
        if event == channel_module.CALLED:
            _state["called"] += 1

    channel_module.RankChannel.send = send


def solution(x, *, group):
    _patch()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
