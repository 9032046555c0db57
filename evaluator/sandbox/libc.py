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

# System-call numbers this sandbox names (its own calls, and those seccomp.py refuses), from the
# kernel's tables (arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h
# for arm64), checked against this machine's headers by tests/sandbox/test_seccomp.py.
SYSCALLS = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
        "perf_event_open": 298, "bpf": 321, "userfaultfd": 323, "keyctl": 250, "add_key": 248,
        "request_key": 249, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166,
        "pivot_root": 155, "chroot": 161, "mount_setattr": 442, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "open_by_handle_at": 304,
        "name_to_handle_at": 303, "fanotify_init": 300, "kexec_load": 246, "kexec_file_load": 320,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "reboot": 169, "swapon": 167,
        "swapoff": 168, "acct": 163, "quotactl": 179, "quotactl_fd": 443, "syslog": 103,
        "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "iopl": 172,
        "ioperm": 173, "lookup_dcookie": 212, "vhangup": 153, "clone3": 435, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "clone": 56, "ioctl": 16, "socket": 41,
        "socketpair": 53,
    },
    "aarch64": {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
        "perf_event_open": 241, "bpf": 280, "userfaultfd": 282, "keyctl": 219, "add_key": 217,
        "request_key": 218, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41,
        "chroot": 51, "mount_setattr": 442, "open_tree": 428, "move_mount": 429, "fsopen": 430,
        "fsconfig": 431, "fsmount": 432, "fspick": 433, "open_by_handle_at": 265,
        "name_to_handle_at": 264, "fanotify_init": 262, "kexec_load": 104, "kexec_file_load": 294,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "reboot": 142, "swapon": 224,
        "swapoff": 225, "acct": 89, "quotactl": 60, "quotactl_fd": 443, "syslog": 116,
        "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171,
        "lookup_dcookie": 18, "vhangup": 58, "clone3": 435, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "clone": 220, "ioctl": 29, "socket": 198,
        "socketpair": 199,
    },
}

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
    if machine not in SYSCALLS:
        raise OSError(38, f"{name}: unsupported machine {machine}")
    return SYSCALLS[machine][name]


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
