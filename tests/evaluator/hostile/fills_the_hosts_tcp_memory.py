"""Attack (all-reduce): hold the host's TCP memory while frozen, so that the reference's gloo,
whose every byte goes over loopback TCP, runs starved beside it, while the candidate reduces
through memory its ranks share and needs no TCP at all.

The kernel's TCP memory is one pool for the whole host (``net.ipv4.tcp_mem``: past its second
value every TCP socket is held to its minimum buffers, past its third no socket may grow),
whatever network namespace a socket is in. Confined, a side has a network namespace of its own but
not a pool of its own; on this host's cgroup v1 a side's memory cgroup does not charge socket
buffers (``memory.kmem.tcp`` is never set), and the init's watch of resident memory does not see
them. At import rank 0 opens connections to itself over its loopback (MPTCP where the kernel has
it, which draws on the same pool), gives each the largest buffers it may ask for, and writes until
the kernel takes no more (about 2.2 GB here, past the host's last limit). Nothing reads them, so they stay while the side stands frozen, and the
reference's all-reduce of 8 KiB took 230 ms a call instead of about 3.

Its own calls need no socket: the two ranks of the side share a folder, so each writes its input
into a file both map, raises a counter, waits for its peer's, and adds the two: correct,
and faster than gloo on its own. Before the fix it passed at far more than its own speed (the
test's bound); it must fail as the candidate's, since the reference cannot be timed beside it.
"""

import json
import os
import socket
import sys

import torch

HELD = []
MAX_BYTES = 4 << 30
CONNECTIONS = 1000
MPTCP = 262  # IPPROTO_MPTCP
RANK = int(sys.argv[2])  # the rank (evaluator/rank_main.py)
SLOT_ELEMENTS = 1 << 20  # per rank and parity; the small size is 4113 elements
# Beside the side's rendezvous file: a folder its ranks share, confined or not, fresh per evaluation.
SHARED = json.loads(open(sys.argv[1]).read())["store_path"] + ".reduce"


def _protocol() -> int:
    """MPTCP where the kernel has it: it draws on TCP's pool, and /proc/net/tcp does not show what
    its connections hold (what a first fix read per namespace, and missed); else plain TCP."""
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM, MPTCP).close()
        return MPTCP
    except OSError:
        return 0


def _fill() -> None:
    protocol = _protocol()
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM, protocol)
    server.bind(("127.0.0.1", 0))
    server.listen(CONNECTIONS)
    HELD.append(server)
    written = 0
    chunk = b"\0" * (1 << 20)
    for _ in range(CONNECTIONS):
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM, protocol)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)
        client.connect(server.getsockname())
        peer, _ = server.accept()
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
        HELD.append(client)
        HELD.append(peer)
        client.setblocking(False)
        while written < MAX_BYTES:
            try:
                written += client.send(chunk)
            except BlockingIOError:
                break
        if written >= MAX_BYTES:
            return


if RANK == 0:
    _fill()

# Two counters (one per rank) and, per rank, two slots (by the call's parity).
_fd = os.open(SHARED, os.O_RDWR | os.O_CREAT, 0o666)
os.ftruncate(_fd, 4096 + 2 * 2 * SLOT_ELEMENTS * 4)
os.close(_fd)
_counters = torch.from_file(SHARED, shared=True, size=512, dtype=torch.int64)
_slots = torch.from_file(SHARED, shared=True, size=1024 + 2 * 2 * SLOT_ELEMENTS, dtype=torch.float32)[1024:]
_slots = _slots.view(2, 2, SLOT_ELEMENTS)  # rank, parity, elements
_state = {"call": 0}


def solution(x, *, group):
    _state["call"] += 1
    call = _state["call"]
    n = x.numel()
    parity = call % 2
    _slots[RANK, parity, :n] = x.reshape(-1).float()
    _counters[RANK * 8] = call
    peer = 1 - RANK
    while int(_counters[peer * 8]) < call:
        pass
    total = (_slots[0, parity, :n] + _slots[1, parity, :n]).to(x.dtype)
    return total.view_as(x)
