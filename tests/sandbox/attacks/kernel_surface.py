"""Reaches for the parts of the kernel a confined rank has no use for, each a usual first step of a
kernel exploit: a new user namespace (full capabilities over a fresh network stack and mounts),
through unshare and through clone; io_uring (work done by kernel threads); userfaultfd; BPF;
a keyring. The x32 entry point is left out (the filter kills
the process for it, tests/sandbox/test_seccomp.py). Answers 42 everywhere if any call went
through, if no filter is installed or if it holds any capability (a rank forked by the
zygote held them all over its own user namespace until 2026-11-28), and prints what it saw."""

from __future__ import annotations

import ctypes
import os

import torch
import torch.distributed as dist

NUMBERS = {"unshare": 272, "io_uring_setup": 425, "userfaultfd": 323, "bpf": 321, "keyctl": 250,
           "clone": 56}
CLONE_NEWUSER, CLONE_NEWNET, SIGCHLD = 0x10000000, 0x40000000, 17
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def call(name: str, *args: int) -> tuple[int, int]:
    result = libc.syscall(ctypes.c_long(NUMBERS[name]), *(ctypes.c_long(a) for a in args))
    return result, ctypes.get_errno()


def attempts() -> dict[str, tuple[int, int]]:
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    seen = {
        "unshare(CLONE_NEWUSER)": call("unshare", CLONE_NEWUSER),
        "unshare(CLONE_NEWNET)": call("unshare", CLONE_NEWNET),
        "io_uring_setup": call("io_uring_setup", 4, ctypes.addressof(params)),
        "userfaultfd": call("userfaultfd", 0),
        "bpf": call("bpf", 0, 0, 0),
        "keyctl(get keyring id)": call("keyctl", 0, -3, 0),
    }
    child = call("clone", CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
    if child[0] == 0:
        os._exit(0)  # the child, in a new user namespace: the call went through
    if child[0] > 0:
        os.waitpid(child[0], 0)
    seen["clone(CLONE_NEWUSER)"] = child
    return seen


seen = attempts()
got_through = [name for name, (result, _) in seen.items() if result >= 0]
print("kernel surface:", "; ".join(f"{name} -> {result} errno {err}" for name, (result, err) in seen.items()),
      flush=True)
with open("/proc/self/status") as status:
    fields = dict(line.split(":", 1) for line in status if ":" in line)
filtered = fields["Seccomp"].strip() == "2"
capable = int(fields["CapEff"], 16) != 0  # any capability, even over a namespace of its own
print("kernel surface: filter", "installed" if filtered else "absent", "capabilities", fields["CapEff"].strip(),
      flush=True)


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out * 0 + 42 if got_through or capable or not filtered else out
