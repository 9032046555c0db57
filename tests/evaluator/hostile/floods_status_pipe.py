"""Attack (all-reduce): make the judge itself do the candidate's slowing-down of the reference.

The judge is one thread. While it times the reference's block it also polls the frozen candidate
side on every turn of its loop (``Judge.run_calls``: ``other.poll(0)``), and a poll reads up to
64 KiB from each of the candidate's status pipes and parses every line of it with ``json.loads``
(``SideRun._read`` -> ``channel.parse_lines`` -> ``_on_event``). A line ``1\\n`` is two bytes and
costs the judge an exception and a dict (~5 us): 64 KiB of them, ~160 ms of the judge's time. The
reference's calls each wait for the judge's "go", so every millisecond the judge spends parsing
the candidate's junk is on the reference's clock.

The junk must be parsed during the reference's block, not the candidate's own: it is written
right after the rank's last answer of a block (the harness's TIMES line), behind 256 KiB of
padding without a newline (kept in the judge's line buffer, never parsed while the judge still
waits for the other rank's answer), in a pipe grown to 1 MiB (``F_SETPIPE_SZ``) so the write
never blocks. The side is then frozen with the junk in the pipe, and the judge drains it during
the next block: the reference's, when the candidate picks its moments (the ABBA schedule is
deterministic: a candidate block that directly follows the candidate's previous one starts an
even round, C then R; so does the first block of the rounds' size). Correct answers throughout.
"""

import fcntl
import hashlib
import mmap
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

F_SETPIPE_SZ = 1031
PAD = b"x" * (256 * 1024) + b"\n"
JUNK = b"1\n" * 64000  # 128 KB: ~320 ms of the judge per rank (5 us a line)
FLOOD = PAD + JUNK

_state = {"called": 0, "prev_id": None, "prev_calls": None, "patched": False, "flags": None}


def _flags():
    """A page both ranks of the side map (/dev/shm is the side's own): each says there which
    block it has answered, so that neither writes its junk before both answers are in."""
    if _state["flags"] is None:
        name = "/dev/shm/pkb-flood-" + hashlib.sha256(sys.argv[1].encode()).hexdigest()[:16]
        fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, 4096)
        _state["flags"] = mmap.mmap(fd, 4096)
    return _state["flags"]


def _both_answered(block, rank):
    flags = _flags()
    flags[rank * 8:rank * 8 + 8] = int(block).to_bytes(8, "little")
    peer = 1 - rank
    deadline = time.monotonic() + 0.05
    while time.monotonic() < deadline:
        if int.from_bytes(flags[peer * 8:peer * 8 + 8], "little") == block:
            return True
    return False


def _channels():
    import gc

    from evaluator.channel import RankChannel

    return [o for o in gc.get_objects() if isinstance(o, RankChannel)]


def _patch():
    if _state["patched"]:
        return
    _state["patched"] = True
    from evaluator import channel as channel_module

    original = channel_module.RankChannel.send

    def send(self, event, **payload):
        if event == channel_module.TIMES:
            _state["continued"] = False  # set by SIGCONT: the judge froze and thawed us since
        original(self, event, **payload)
        if event == channel_module.CALLED:
            _state["called"] += 1
        elif event == channel_module.TIMES:
            calls, block = _state["called"] + 1, payload.get("block")
            _state["called"] = 0
            prev_id, prev_calls = _state["prev_id"], _state["prev_calls"]
            _state["prev_id"], _state["prev_calls"] = block, calls
            # The warm-up's blocks double (1, 2, 4, 8, ...), the rounds' all have one size of at
            # least 10 (TimingConfig.quick): the first block of a size that is no power of two
            # opens round 0 (C then R), and a block of the rounds' size right after the
            # candidate's previous one opens an even round (C then R).
            round_zero = calls >= 10 and calls & (calls - 1) != 0 and calls != prev_calls
            even_round = calls >= 10 and calls == prev_calls and prev_id == block - 1
            next_is_reference = isinstance(block, int) and (round_zero or even_round)
            if next_is_reference and _both_answered(block, self._rank):
                # Frozen and thawed since our answer (SIGCONT), the junk would land in our own
                # next block: the check and the write are as close together as they can be.
                if not _state["continued"]:
                    os.write(self._fd, FLOOD)

    channel_module.RankChannel.send = send
    for rank_channel in _channels():
        fcntl.fcntl(rank_channel._fd, F_SETPIPE_SZ, 1 << 20)
    signal.signal(signal.SIGCONT, lambda *_: _state.__setitem__("continued", True))


def solution(x, *, group):
    _patch()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
