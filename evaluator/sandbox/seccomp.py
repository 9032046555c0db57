"""A system-call filter for every rank (seccomp, classic BPF), installed last in its set-up.

Namespaces decide what a rank can name; this decides which parts of the kernel it can reach at
all. A rank needs none of the calls below (CPU and GPU ranks, their compilers and build tools,
NCCL, Triton), and each is a way into kernel code that a confined process has no use for:
ptrace and reading other processes' memory, new namespaces (a fresh user namespace is full
capabilities over a new network stack and new mounts: the usual road to a kernel bug), io_uring
(work done by kernel threads, outside the caller's accounting and filters), BPF, userfaultfd (the
usual tool to widen a kernel race), keyrings, perf events, file handles that bypass the mount
tree, clocks, modules, swap, reboot. Refused calls fail with an errno, as if the kernel lacked
them, so well-behaved libraries fall back (glibc's threads from clone3 to clone, io_uring users
to epoll); the filter kills only a call made through another architecture's table (the x32 or
32-bit entry points, which would dodge every number below).

The filter is inherited by every process a rank starts and survives exec; the side's init and
the evaluator are not filtered. It needs no_new_privs, which the rank has already set.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

from .libc import SYSCALLS  # the numbers, for x86_64 and aarch64

# What a refused call returns: EPERM, or ENOSYS where callers are known to fall back on it.
_REFUSED_EPERM = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "perf_event_open", "bpf",
    "userfaultfd", "keyctl", "add_key", "request_key", "unshare", "setns",
    "mount", "umount2", "pivot_root", "chroot", "mount_setattr", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "open_by_handle_at", "name_to_handle_at", "fanotify_init",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "iopl", "ioperm", "lookup_dcookie", "vhangup",
)
_REFUSED_ENOSYS = ("clone3", "io_uring_setup", "io_uring_enter", "io_uring_register")

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_SYSCALL_BIT = 0x40000000
# clone's flags that make namespaces (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
# NEWNET); its low byte is the exit signal, so CLONE_NEWTIME (0x80) cannot be told apart there
# (that one is reached only through clone3 and unshare, both refused).
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

# Socket families a rank uses: unix (pipes, NCCL's and PyTorch's descriptor passing), IPv4 and
# IPv6 on the loopback (rendezvous, gloo, NCCL bootstrap), netlink (getifaddrs, how NCCL lists
# interfaces). Any other (packet, vsock, the kernel's crypto sockets, ...) answers EAFNOSUPPORT.
_SOCKET_FAMILIES = (1, 2, 10, 16)
# ioctls no rank needs that write into another process's terminal input (TIOCSTI, TIOCLINUX).
_TERMINAL_INJECTION = (0x5412, 0x541C)

# Classic BPF, as seccomp runs it (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K, _JGE_K, _JSET_K = 0x15, 0x35, 0x45
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_NR, _ARCH, _ARG0_LOW, _ARG1_LOW = 0, 4, 16, 24  # offsets in struct seccomp_data (little-endian machines)
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def refused() -> dict[str, int]:
    """Each refused call by name, with the errno it returns."""
    return {**{name: errno.EPERM for name in _REFUSED_EPERM}, **{name: errno.ENOSYS for name in _REFUSED_ENOSYS}}


def supported() -> bool:
    return platform.machine() in SYSCALLS


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter's instructions (code, jump if true, jump if false, k) for ``machine``."""
    numbers = SYSCALLS[machine]
    denied = [(numbers[name], code) for name, code in refused().items() if name in numbers]
    prog: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 1, 0, _AUDIT_ARCH[machine]),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if machine == "x86_64":  # the x32 table: the same calls under other numbers
        prog += [(_JGE_K, 0, 1, _X32_SYSCALL_BIT), (_RET_K, 0, 0, _RET_KILL_PROCESS)]
    for number, code in denied:
        prog += [(_JEQ_K, 0, 1, number), (_RET_K, 0, 0, _RET_ERRNO | code)]
    # Each block below: "is it this call?" (else skip the block), load an argument, compare it
    # with each value (a match jumps to the block's last instruction), then two returns.
    for name in ("socket", "socketpair"):  # the family: allowed ones jump to ALLOW
        families = len(_SOCKET_FAMILIES)
        prog.append((_JEQ_K, 0, families + 3, numbers[name]))
        prog.append((_LD_W_ABS, 0, 0, _ARG0_LOW))
        prog += [(_JEQ_K, families - i, 0, family) for i, family in enumerate(_SOCKET_FAMILIES)]
        prog += [(_RET_K, 0, 0, _RET_ERRNO | errno.EAFNOSUPPORT), (_RET_K, 0, 0, _RET_ALLOW)]
    requests = len(_TERMINAL_INJECTION)  # the request: refused ones jump to EPERM
    prog.append((_JEQ_K, 0, requests + 3, numbers["ioctl"]))
    prog.append((_LD_W_ABS, 0, 0, _ARG1_LOW))
    prog += [(_JEQ_K, requests - i, 0, request) for i, request in enumerate(_TERMINAL_INJECTION)]
    prog += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM)]
    prog += [
        (_JEQ_K, 0, 3, numbers["clone"]),
        (_LD_W_ABS, 0, 0, _ARG0_LOW),
        (_JSET_K, 0, 1, _CLONE_NAMESPACES),
        (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
        (_RET_K, 0, 0, _RET_ALLOW),
    ]
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> None:
    """Filter this thread's process from here on (call it single-threaded: the filter applies to
    the calling thread and what it starts). Raises OSError where the kernel refuses."""
    machine = platform.machine()
    if machine not in SYSCALLS:
        raise OSError(errno.ENOSYS, f"no system-call filter is written for {machine}")
    prog = program(machine)
    raw = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *insn) for insn in prog))
    fprog = _SockFprog(len(prog), ctypes.cast(raw, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(_SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                  ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"installing the sandbox's system-call filter: {errno.errorcode.get(err, err)}")
