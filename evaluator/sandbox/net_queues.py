"""What a network namespace's sockets hold queued, from its /proc/net tables: the bytes the
kernel keeps for each TCP or UDP socket in its send and receive queues. Read by the side's init
for its memory watch (sandbox/watch.py) and by the judge for the host's TCP pool
(judge/host_tcp.py); neither pool is charged to any process's resident set."""

from __future__ import annotations

from typing import Sequence


def queued_per_socket(folder: str, tables: Sequence[str], limit: int) -> tuple[list[int], int, bool]:
    """Each socket's send plus receive queue in bytes, from ``folder``'s ``tables`` (``tcp``,
    ``udp6``, ...), listening TCP sockets left out (their queue columns count connections, not
    bytes); the lines read; and whether there were more than ``limit`` (the rest left unread). A
    table that cannot be read or parsed gives what was read of it."""
    queues: list[int] = []
    lines = 0
    for name in tables:
        try:
            with open(f"{folder}/{name}", "rb") as handle:
                next(handle, None)  # the header
                for line in handle:
                    lines += 1
                    if lines > limit:
                        return queues, lines, True
                    fields = line.split()
                    if len(fields) < 5 or fields[3] == b"0A":  # 0A: TCP_LISTEN
                        continue
                    tx, _, rx = fields[4].partition(b":")
                    queues.append(int(tx, 16) + int(rx, 16))
        except (OSError, ValueError):
            continue
    return queues, lines, False
