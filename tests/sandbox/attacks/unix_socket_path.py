"""Connects to unix sockets of the host: one the test listens on in /tmp, and the usual daemons'
(Docker, containerd, PostgreSQL, D-Bus, X11). Without a private filesystem the connection to the
test's socket would be made (and Docker's socket alone is root on the host)."""

from __future__ import annotations

import glob
import socket
import sys

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
TARGET = "__UNIX_PATH__"
got_through: list[str] = []
USUAL = ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
         "/var/run/postgresql/.s.PGSQL.5432", "/run/dbus/system_bus_socket", "/tmp/.X11-unix/X0"]


def attack() -> None:
    for path in [TARGET] + USUAL + glob.glob("/tmp/*.sock") + glob.glob("/run/*.sock"):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(2)
                sock.connect(path)
                sock.sendall(f"{MARKER} was here\n".encode())
                got_through.append(f"connected to {path}")
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
