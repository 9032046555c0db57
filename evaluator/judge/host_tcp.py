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

Which sockets hold the pool cannot be read per namespace (/proc/net/tcp's queues miss MPTCP's:
4 MB sent over one MPTCP connection showed 48 KB there), so it is told by elimination: when the
judge looks, both sides stand stopped, the reference's sockets are drained (its calls are done)
and nothing else of this evaluation holds any. The pool grown since the evaluation began, by more
than a quarter of the low mark and past half of it, is then the candidate's doing (on a host where
nothing else holds that much TCP memory: a worker runs one evaluation at a time).
"""

from __future__ import annotations

import os
from typing import Optional

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


def starved(at_start: Optional[int]) -> Optional[str]:
    """Why the reference cannot be run now for want of TCP memory, with the candidate stopped, or
    None: the host's pool past half of its low mark, and grown since the evaluation began
    (``at_start``, in pages) by more than a quarter of it. Two small files, read off the clock."""
    pages, low = host_tcp_pages(), host_tcp_low()
    if pages is None or low is None or at_start is None or pages * 2 < low or (pages - at_start) * 4 < low:
        return None
    return (f"the host's TCP memory was {pages * PAGE / 2**20:.0f} MiB while the candidate stood stopped "
            f"({at_start * PAGE / 2**20:.0f} MiB when the evaluation began), past half of the "
            f"{low * PAGE / 2**20:.0f} MiB below which the kernel leaves TCP alone: sockets left full are one "
            "pool for the whole host, and the reference's would run starved beside them")
