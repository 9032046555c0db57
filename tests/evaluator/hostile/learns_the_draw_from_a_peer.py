"""Attack (all-reduce): learn whether a call is checked before a rank's outputs are copied, and
answer wrong on that rank whenever it is not.

The judge decides whether call i is checked when the *first* rank says it is done
(``Judge.timed_block`` ``on_called``: ``decided[call] = sample.offer(...)``), copies that rank's
slot right away if so, and only then sends it ``go``; the other ranks' slots are copied later, as
each of them says it is done. So the first rank can tell from its own ``called`` -> ``go`` delay
whether the judge copied its slot, and tell its peers before they answer. The delay is made
unmistakable: rank 0 pads its slot's header with 64 KB of JSON numbers that the judge's
``json.loads`` takes ~3.4 ms to parse, which it does only for a checked call (the padding is valid
JSON; only ``"outputs"`` is read). Rank 0 writes, per call, "checked or unknown" / "not checked"
into a flag file in the side's /dev/shm once its ``go`` arrives (a block's last call, decided only
once the side is frozen, is always "unknown"); rank 1 waits for that flag before writing its own
outputs, and writes zeros where the call is not checked. Noise can only lengthen the delay, so a
checked call is never taken for an unchecked one: rank 1 is right on every call the judge checks,
and wrong on most of the others. Rank 1 counts its wrong answers on stderr.

The gain here is correctness, not time (rank 1 waits for the flag, which costs a round trip): on a
problem where a rank's own work follows the communication (a GEMM after an all-gather, a local
reduction), every rank but the first to answer skips that work on every unchecked call. The bound
the report states (``pass_bound``: f^64) assumes the draw is secret until each output is copied.

Command: .venv/bin/python -m evaluator.cli eval --problem all-reduce \
    --solution tests/evaluator/hostile/learns_the_draw_from_a_peer.py --world-size 2 --device cpu --size small

Measured 2026-11-28 (2-core machine): sandbox on, three runs: PASS (0.81x, 150 counted calls),
PASS (0.75x, 160), PASS (0.71x, 110). With ``--no-sandbox`` (so that the flag file stays in the
host's /dev/shm to be read afterwards): PASS over 120 counted calls, rank 1 returned zeros on 10 of
them (13 calls in all, warm-up included), and on none the judge checked. The CPU's quick timing
(1.5 s of rounds) makes few calls beyond the first 64, which are all checked; the reservoir
leaves a call of a run of N counted calls unchecked with probability 1 - 64/N as it is offered,
so on GPU configurations (thousands of calls) rank 1 would be wrong on nearly all of them.

Fix: decide a call's fate only once every rank has said it is done, and copy every rank's slot
(if drawn) before the first ``go`` of the next call goes to any rank: in ``Judge.run_calls``, hold
each rank's ``go`` for call i+1 until all ranks said ``called`` for i (the same judge-held barrier
that makes skips_the_alignment.py moot). A rank can still time its own ``go``, but by then every
slot of that call has been copied. The time of the copy itself also leaks the draw afterwards (a
drawn call's go is later by the header parse and the clone); that is harmless only once nothing of
that call can still be written.
"""

import hashlib
import json
import mmap
import os
import struct
import sys
import time

import torch
import torch.distributed as dist

THRESHOLD_S = 0.0006  # a checked call's go comes >= ~1.1 ms after called (the judge parses the pad)
PAD = "1e1," * 5000
FLAGS = 1 << 20  # one byte per call: 0 nothing yet, 1 checked or unknown, 2 not checked
_state = {"n": 0, "called_at": None, "patched": False, "flags": None, "wrong": 0, "honest": 0}


def _flags():
    if _state["flags"] is None:
        name = "/dev/shm/pkb-draw-" + hashlib.sha256(sys.argv[1].encode()).hexdigest()[:16]
        fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, 2 * FLAGS)  # then what rank 1 did with each call (for the record)
        _state["flags"] = mmap.mmap(fd, 2 * FLAGS)
    return _state["flags"]


def _patch(rank):
    _state["patched"] = True
    from evaluator import channel as channel_module, rank_runner
    from evaluator.shim import buffers, calls

    send = channel_module.RankChannel.send
    write_outputs = buffers.SharedBuffers.write_outputs
    wait_for_go = calls._wait_for_go
    flags = _flags()

    def patched_send(self, event, **payload):
        if event == channel_module.CALLED:
            _state["called_at"] = time.perf_counter()
        elif event == channel_module.TIMES and rank == 0:
            flags[_state["n"] % FLAGS] = 1  # the block's last call: decided after the freeze
        send(self, event, **payload)

    def patched_wait_for_go(commands, block, index):
        wait_for_go(commands, block, index)
        if rank == 0 and _state["called_at"] is not None:
            delay = time.perf_counter() - _state["called_at"]
            flags[_state["n"] % FLAGS] = 1 if delay >= THRESHOLD_S else 2

    def patched_write_outputs(self, outputs, slot, capacity):
        if rank != 0:
            deadline = time.monotonic() + 0.5
            while flags[_state["n"] % FLAGS] == 0 and time.monotonic() < deadline:
                time.sleep(0.00005)
            if flags[_state["n"] % FLAGS] == 2:
                outputs = [torch.zeros_like(t) for t in outputs]
                _state["wrong"] += 1
                flags[FLAGS + _state["n"] % FLAGS] = 2
            else:
                _state["honest"] += 1
                flags[FLAGS + _state["n"] % FLAGS] = 1
            if _state["n"] % 200 == 0:
                print(f"rank {rank}: call {_state['n']}: wrong on {_state['wrong']}, honest on "
                      f"{_state['honest']}", file=sys.stderr, flush=True)
        write_outputs(self, outputs, slot, capacity)
        if rank == 0:  # the same outputs, the header padded with numbers the judge must parse
            length = struct.unpack("<I", bytes(self.output.view(slot, 4).numpy()))[0]
            header = json.loads(bytes(self.output.view(slot + 4, length).numpy()))
            body = (json.dumps(header)[:-1] + ', "pad": [' + PAD.rstrip(",") + "]}").encode()
            raw = bytearray(struct.pack("<I", len(body)) + body)
            self.output.view(slot, len(raw)).copy_(torch.frombuffer(raw, dtype=torch.uint8))

    rank_runner.TaskRunner.align = lambda self: None  # for speed only (skips_the_alignment.py)
    channel_module.RankChannel.send = patched_send
    calls._wait_for_go = patched_wait_for_go
    buffers.SharedBuffers.write_outputs = patched_write_outputs


def solution(x, *, group):
    rank = dist.get_rank()
    if not _state["patched"]:
        _patch(rank)
    _state["n"] += 1
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
