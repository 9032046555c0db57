"""The few Linux system calls the sandbox needs that Python's ``os`` module lacks (3.11 and 3.12).

Thin ctypes wrappers that raise ``OSError`` with errno, nothing more: the policy lives elsewhere.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
from typing import Callable

_libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38

_SYSCALLS = {"x86_64": {"pivot_root": 155, "mount_setattr": 442},
             "aarch64": {"pivot_root": 41, "mount_setattr": 442}}
MOUNT_ATTR_RDONLY = 0x1
AT_FDCWD = -100
AT_RECURSIVE = 0x8000


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source or fstype} on {target}")


def umount(target: str, flags: int = 0) -> None:
    _check(_libc.umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def _syscall_number(name: str) -> int:
    machine = platform.machine()
    if machine not in _SYSCALLS:
        raise OSError(38, f"{name}: unsupported machine {machine}")
    return _SYSCALLS[machine][name]


def pivot_root(new_root: str, put_old: str) -> None:
    _check(_libc.syscall(ctypes.c_long(_syscall_number("pivot_root")), new_root.encode(), put_old.encode()),
           "pivot_root")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def make_tree_read_only(path: str) -> None:
    """Every mount at and below ``path`` read-only (mount_setattr, Linux 5.12+)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    _check(_libc.syscall(ctypes.c_long(_syscall_number("mount_setattr")), ctypes.c_int(AT_FDCWD),
                         path.encode(), ctypes.c_uint(AT_RECURSIVE), ctypes.byref(attr),
                         ctypes.c_size_t(ctypes.sizeof(attr))), f"mount_setattr {path}")


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                       ctypes.c_ulong(0)), f"prctl {option}")


def dies_with(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child is sent SIGKILL when process ``parent_pid`` (its parent) dies,
    and exits at once if that happened before the signal was armed. For children started in a
    session of their own, which their parent's death would otherwise leave running."""

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:
            os._exit(1)

    return arm


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_CAPABILITY_VERSION_3 = 0x20080522


def drop_capabilities() -> None:
    """Empty effective, permitted and inheritable sets for this thread (capset, version 3)."""
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def sethostname(name: str) -> None:
    data = name.encode()
    _check(_libc.sethostname(data, ctypes.c_size_t(len(data))), "sethostname")
