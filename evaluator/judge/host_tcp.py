"""The host's TCP memory, as the judge reads it before it runs the reference beside a frozen candidate.

The kernel keeps one pool of TCP buffer memory for the whole host (``net.ipv4.tcp_mem``: low,
pressure, high, in pages), whatever network namespace a socket is in, and MPTCP draws on the same
pool: past the second value every TCP socket of the host is held to its minimum buffers, past the
third none may grow. A side's own network namespace is no pool of its own, and a memory cgroup
charges socket buffers only where asked (cgroup v1 never is here; GPU hosts have no cgroup for a
side at all). So a candidate that leaves its sockets full while it stands frozen starves the
reference's gloo, whose every byte goes over loopback TCP (red team, fills_the_hosts_tcp_memory:
178 ms an 8 KiB all-reduce instead of 2, and a candidate that reduced through a file its ranks
share passed at 155x).

What a namespace's sockets hold cannot be read whole (/proc/net/tcp's queues miss MPTCP's: 4 MB
sent over one MPTCP connection showed 48 KB there; a socket holds up to a page it has no queue
for), so the judge asks for two things. The pool: when it looks, both sides stand stopped and the
reference's sockets are drained (its calls are done); past half of the low mark. And the
candidate's own share of it, in its network namespace: an eighth of the pool queued in its TCP
sockets (a page at least for each socket holding any), or any MPTCP socket (neither gloo nor NCCL
opens one), or more TCP sockets than an honest rank opens. The share keeps another evaluation on
the same host, filling the pool, from failing an honest candidate; it is not the pool's growth
since the candidate began, which a fill already there when it began hid (unconfined, 8.6x beside
another session's fill). Unconfined the candidate's sockets are in the host's namespace, mixed
with everyone's.
"""

from __future__ import annotations

import os
from typing import Optional

from ..sandbox.net_queues import queued_per_socket

PAGE = os.sysconf("SC_PAGE_SIZE")


def host_tcp_pages() -> Optional[int]:
    """Pages of TCP (and MPTCP) buffer memory in use on the whole host (/proc/net/sockstat's
    "TCP: ... mem")."""
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
    """The kernel's low mark for TCP memory, in pages (the first value of net.ipv4.tcp_mem): below
    it the kernel leaves TCP alone."""
    try:
        with open("/proc/sys/net/ipv4/tcp_mem", "rb") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


# TCP socket lines read of the candidate's namespace at most: honest ranks hold a few per peer, and
# a namespace with more is the candidate's doing (each socket may hold a page it shows no queue for).
MAX_SOCKETS = 8192


def namespace_share(net: str) -> tuple[int, int, bool]:
    """In the network namespace whose /proc/PID/net folder is ``net``: bytes its TCP sockets hold
    by their queues (a page at least for each that holds any; listening sockets count connections
    there, not bytes), its MPTCP sockets, and whether it has more than MAX_SOCKETS TCP sockets."""
    queues, _, too_many = queued_per_socket(net, ("tcp", "tcp6"), MAX_SOCKETS)
    held = sum(max(queued, PAGE) for queued in queues if queued)
    if too_many:
        return held, 0, True
    mptcp = 0
    try:
        with open(f"{net}/protocols", "rb") as handle:
            for line in handle:
                if line.startswith(b"MPTCP"):
                    mptcp += int(line.split()[2])  # its "sockets" column: in use in this namespace
    except (OSError, ValueError, IndexError):
        pass
    return held, mptcp, False


def starved(at_start: Optional[int], net: str) -> Optional[str]:
    """Why the reference cannot be run now for want of TCP memory, with the candidate stopped, or
    None: the host's pool past half of its low mark, and the candidate's namespace (``net``, a
    /proc/PID/net folder) holding its share of it. ``at_start``: the pool when the candidate began
    (pages), for the message. Two small files while the pool is low, read off the clock."""
    pages, low = host_tcp_pages(), host_tcp_low()
    if pages is None or low is None or pages * 2 < low:
        return None
    held, mptcp, too_many = namespace_share(net)
    if not (too_many or mptcp or held * 8 >= pages * PAGE):
        return None  # filled by another's sockets, not this candidate's
    share = (f"more than {MAX_SOCKETS} TCP sockets" if too_many else f"{mptcp} MPTCP sockets" if mptcp
             else f"TCP sockets holding {held / 2**20:.0f} MiB")
    return (f"the host's TCP memory was {pages * PAGE / 2**20:.0f} MiB while the candidate stood stopped "
            f"({'?' if at_start is None else f'{at_start * PAGE / 2**20:.0f}'} MiB when it began; its network held {share}), "
            f"past half of the {low * PAGE / 2**20:.0f} MiB below which the kernel leaves TCP alone: sockets "
            "left full are one pool for the whole host, and the reference's would run starved beside them")
