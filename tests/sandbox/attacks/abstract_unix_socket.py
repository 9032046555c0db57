"""Connects to abstract-namespace unix sockets: the one the test listens on, and every abstract
name listed in /proc/net/unix. Abstract sockets have no file, so only a network namespace keeps a
candidate from them; without one the connection to the test's socket would be made."""

from __future__ import annotations

import socket
import sys

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
TARGET = "__ABSTRACT_NAME__"
got_through: list[str] = []


def listed() -> list[str]:
    try:
        with open("/proc/net/unix") as handle:
            return [line.split()[-1][1:] for line in handle if line.split()[-1].startswith("@")]
    except OSError:
        return []


def attack() -> None:
    for name in [TARGET] + listed():
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(2)
                sock.connect("\0" + name)
                if name == TARGET:
                    sock.sendall(f"{MARKER} was here\n".encode())
                    got_through.append(f"connected to @{name}")
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
