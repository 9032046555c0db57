"""The host's TCP memory, as the judge reads it before it runs the reference beside a frozen candidate.

The kernel keeps one pool of TCP buffer memory for the whole host (``net.ipv4.tcp_mem``: low,
pressure, high, in pages), whatever network namespace a socket is in: past the second value every
TCP socket of the host is held to its minimum buffers, past the third none may grow. A side's own
network namespace is no pool of its own, and a memory cgroup charges socket buffers only where
asked (cgroup v1 never is here; GPU hosts have no cgroup for a side at all). So a candidate that
leaves its sockets full while it stands frozen starves the reference's gloo, whose every byte goes
over loopback TCP (red team, fills_the_hosts_tcp_memory: 230 ms an 8 KiB all-reduce instead of 3,
and a candidate that reduced through its own shared memory passed at 155x).

Nothing is read of the candidate while the host's TCP memory is below half of the low mark (one
small file): below the low mark the kernel leaves TCP alone. Past it, the candidate's sockets (its
network namespace's, confined) are read: queued bytes are its own, and so is a host short of TCP
memory while its sockets hold any.
"""

from __future__ import annotations

import os
from typing import Optional

PAGE = os.sysconf("SC_PAGE_SIZE")
# The socket lines read of the candidate's network namespace at most: honest ranks hold a few per
# peer; a namespace with more is the candidate's doing, and reading them all costs the judge time.
MAX_SOCKETS = 8192


def host_tcp_pages() -> Optional[int]:
    """Pages of TCP buffer memory in use on the whole host (/proc/net/sockstat's "TCP: ... mem")."""
    try:
        with open("/proc/net/sockstat", "rb") as handle:
            for line in handle:
                if line.startswith(b"TCP:"):
                    fields = line.split()
                    return int(fields[fields.index(b"mem") + 1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def host_tcp_low() -> Optional[int]:
    """The kernel's low mark for TCP memory, in pages (the first value of net.ipv4.tcp_mem)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_mem", "rb") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def queued_in_namespace(pid: int) -> tuple[int, int, bool]:
    """(bytes queued, sockets holding any, whether there were more than MAX_SOCKETS lines) in the
    TCP sockets of ``pid``'s network namespace. Listening sockets hold no data (their queue fields
    count connections)."""
    queued = holding = lines = 0
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{name}", "rb") as handle:
                next(handle, None)  # the header
                for line in handle:
                    lines += 1
                    if lines > MAX_SOCKETS:
                        return queued, holding, True
                    fields = line.split()
                    if len(fields) < 5 or fields[3] == b"0A":
                        continue
                    tx, _, rx = fields[4].partition(b":")
                    amount = int(tx, 16) + int(rx, 16)
                    if amount:
                        queued += amount
                        holding += 1
        except (OSError, ValueError):
            continue
    return queued, holding, False


def starved_by(pids: list[int]) -> Optional[str]:
    """Why the reference cannot be run beside these (stopped) processes of the candidate for want
    of TCP memory, or None. The candidate is blamed only for what its own sockets hold: the host's
    pool past half of its low mark while they hold any, or a namespace of more sockets than any
    honest rank opens."""
    pages, low = host_tcp_pages(), host_tcp_low()
    if pages is None or low is None or pages * 2 < low or not pids:
        return None
    for pid in pids:
        if os.path.exists(f"/proc/{pid}/net/tcp"):
            queued, holding, too_many = queued_in_namespace(pid)
            break
    else:
        return None
    # Its own share of the pool, counted low (a socket holding any data holds a page at least): a
    # host short of TCP memory for another's reasons is not the candidate's doing.
    held = queued + holding * PAGE
    if not too_many and held * 8 < pages * PAGE:
        return None
    what = (f"more than {MAX_SOCKETS} TCP sockets" if too_many else
            f"{holding} TCP sockets with {queued / 2**20:.0f} MiB queued in them")
    return (f"the candidate's processes held {what} while they stood stopped, and the host's TCP memory "
            f"was {pages * PAGE / 2**20:.0f} MiB, past half of the {low * PAGE / 2**20:.0f} MiB below which "
            "the kernel leaves TCP alone: one pool for the whole host, so the reference's sockets would "
            "run starved beside them")
