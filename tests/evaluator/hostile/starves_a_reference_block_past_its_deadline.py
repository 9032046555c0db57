"""Attack (all-reduce): starve one of the reference's timed blocks from inside the freeze until it
runs past its deadline, so that the judge reports the reference's failure before it reads the
candidate.

Around each reference block the judge reads every thread of the stopped candidate, before and
after: a thread that ran in between is the candidate's protocol_violation. But the reading after
came only once the block was over; a reference block that failed first (its deadline: the step
limit plus 20 times its expected length) ended the evaluation at once as the reference's failure,
that is our harness_error, and the candidate's threads were never read. (The reference's start-up
had the same shape, closed in the seventh pass: its reading comes first.)

At import rank 0 starts a helper with a one-shot timer. After a candidate block that the
reference's follows (the ABBA schedule is deterministic, see spins_under_the_margin.py), the rank
tells it a time past the judge's reads after the block, a quarter into the reference's (it learns
both from the gaps between its own blocks: the judge numbers every block, both sides'); the helper
is frozen with the side, continued by its timer, forks SPINNERS children, each in a session of its
own (a scheduler group of its own where the kernel groups by session), and all spin for HOLD_S.
The reference's ranks and the judge get a share of the processors, and its block, tens of ms on its
own, may run past its deadline. Its answers are wrong (it never communicates): it must fail as the
candidate's, never as ours.

Measured 2026-11-29 on the 2-core machine, sandbox on, before the fix, with a 1 s step limit (an
earlier version, its helper woken a fixed 12 ms after the block's answer): 1 run of 3 ended as our
harness_error ("ranks 0, 1 did not finish a timed block in time (timed block 14, 2 s)"), the other
two were caught after the block; with a 2 s limit 5 runs of 5 were caught (4 beside the block,
which ended in time although the candidate used up to 4600 ms of processor beside it; 1 before).
How far a block is starved is the scheduler's; the judge's order is what the test checks
(test_judge_holes.py): a reference that fails beside a candidate that ran is the candidate's.
"""

import os
import struct
import subprocess
import sys
import time

SPINNERS = 200
HOLD_S = 20.0

HELPER = r"""
import ctypes, os, signal, struct, sys, time
commands, spinners, hold = int(sys.argv[1]), int(sys.argv[3]), float(sys.argv[4])
libc = ctypes.CDLL(None, use_errno=True)
event = ctypes.create_string_buffer(64)
struct.pack_into("qii", event, 0, 0, signal.SIGCONT, 0)  # SIGEV_SIGNAL to the process
timer = ctypes.c_void_p()
libc.timer_create(1, event, ctypes.byref(timer))
due = [None]

def spin():
    until = time.monotonic() + hold
    while time.monotonic() < until:
        pass

def on_continue(*_):
    if due[0] is None or time.monotonic_ns() < due[0]:
        return
    due[0] = None
    for _ in range(spinners):  # new processes: each a session, a scheduler group, of its own
        if os.fork() == 0:
            os.setsid()
            spin()
            os._exit(0)
    spin()

signal.signal(signal.SIGCONT, on_continue)
os.write(int(sys.argv[2]), b"r")
while True:
    data = os.read(commands, 8)
    if len(data) < 8:
        os._exit(0)
    due[0] = struct.unpack("<q", data)[0]
    libc.timer_settime(timer, 1, ctypes.create_string_buffer(struct.pack("qqqq", 0, 0, *divmod(due[0], 10**9))), None)
    os.write(int(sys.argv[2]), b"a")  # armed: the rank answers its block only then
"""

_state = {"called": 0, "prev_id": None, "patched": False, "to_helper": None, "sent": False, "acks": None,
          "times_at": None, "started_at": None, "gaps": {1: [], 2: [], 3: []}}

if sys.argv[2] == "0":  # the rank (evaluator/rank_main.py)
    _ready, _ready_w = os.pipe()
    _commands, _state["to_helper"] = os.pipe()
    _helper = subprocess.Popen([sys.executable, "-S", "-c", HELPER, str(_commands), str(_ready_w), str(SPINNERS),
                                str(HOLD_S)], pass_fds=(_commands, _ready_w))
    os.close(_ready_w)
    os.close(_commands)
    _state["acks"] = _ready
    os.read(_ready, 1)


def _median(values):
    return sorted(values)[len(values) // 2]


def _patch():
    if _state["patched"] or _state["to_helper"] is None:
        return
    _state["patched"] = True
    from evaluator import channel as channel_module

    original = channel_module.RankChannel.send

    def send(self, event, **payload):
        if event == channel_module.TIMES:
            now = time.monotonic_ns()
            calls, block = _state["called"] + 1, payload.get("block")
            prev_id = _state["prev_id"]
            _state["called"], _state["prev_id"] = 0, block
            # The judge numbers every block, both sides' (and trials): from the gaps between this
            # side's answer and its next block's first call, with no reference block between (ids one
            # apart: a round's second block and the next round's first) or two (three apart: the
            # rounds go C R, R C), where the reference's block lies after an answer.
            if isinstance(block, int) and isinstance(prev_id, int) and block - prev_id in (1, 2, 3) \
                    and _state["times_at"] is not None and _state["started_at"] is not None:
                _state["gaps"][block - prev_id].append(_state["started_at"] - _state["times_at"])
            gaps = _state["gaps"]
            # C C: this block opens an even round, and the reference's block comes next (warm-up
            # blocks double from 1 call; a round's have at least 10). Once: one block is enough.
            if isinstance(block, int) and prev_id == block - 1 and calls >= 10 and calls & (calls - 1) \
                    and not _state["sent"] and gaps[1] and gaps[3]:
                _state["sent"] = True
                before, reference = _median(gaps[1]), (_median(gaps[3]) - _median(gaps[1])) // 2
                due = now + before + reference // 4
                # The helper arms its timer while the side still runs, then waits in its read (a
                # helper still on its way there after the freeze is seen running).
                os.write(_state["to_helper"], struct.pack("<q", due))
                os.read(_state["acks"], 1)
                time.sleep(0.005)
            _state["times_at"], _state["started_at"] = time.monotonic_ns(), None
        original(self, event, **payload)
        if event == channel_module.CALLED:
            _state["called"] += 1

    channel_module.RankChannel.send = send


def solution(x, *, group):
    _patch()
    if _state["started_at"] is None:
        _state["started_at"] = time.monotonic_ns()
    return x.clone()  # its own share only: wrong on every call
