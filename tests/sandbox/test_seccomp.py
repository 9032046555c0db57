"""The sandbox's system-call filter (evaluator/sandbox/seccomp.py), in a process of its own: what it
refuses, with which errno, and that what ranks need (threads, fork, exec, sockets) still works.
The whole-side check is test_attacks.py's kernel_surface attack (make test-long)."""

from __future__ import annotations

import json
import platform
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.sandbox import libc, seccomp

REPO = Path(__file__).resolve().parents[2]
HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
           "aarch64": Path("/usr/include/asm-generic/unistd.h")}

pytestmark = pytest.mark.skipif(not seccomp.supported(), reason=f"no filter for {platform.machine()}")

# Run after the filter is installed. Arguments are harmless where a call would go through
# (the test's own process tree only); each result is (return value, errno).
FILTERED = r"""
import ctypes, errno, json, os, subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
from evaluator.sandbox import seccomp
from evaluator.sandbox.libc import SYSCALLS
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs, as a rank has it
seccomp.install()
N = SYSCALLS[sys.argv[2]]
def call(name, *args):
    ctypes.set_errno(0)
    return [libc.syscall(ctypes.c_long(N[name]), *(ctypes.c_long(a) for a in args)), ctypes.get_errno()]
params = ctypes.create_string_buffer(120)
seen = {
    "unshare": call("unshare", 0x10000000), "setns": call("setns", -1, 0), "ptrace": call("ptrace", 0, 0, 0, 0),
    "process_vm_readv": call("process_vm_readv", os.getpid(), 0, 0, 0, 0, 0),
    "io_uring_setup": call("io_uring_setup", 4, ctypes.addressof(params)), "userfaultfd": call("userfaultfd", 0),
    "bpf": call("bpf", 0, 0, 0), "keyctl": call("keyctl", 0, -3, 0), "perf_event_open": call("perf_event_open", 0, 0, -1, -1, 0),
    "clone3": call("clone3", 0, 0), "mount": call("mount", 0, 0, 0, 0, 0), "chroot": call("chroot", 0),
    "pidfd_getfd": call("pidfd_getfd", -1, 0, 0), "syslog": call("syslog", 10, 0, 0),
    "socket(AF_PACKET)": call("socket", 17, 3, 0), "socket(AF_ALG)": call("socket", 38, 5, 0),
    "socketpair(AF_VSOCK)": call("socketpair", 40, 1, 0, 0), "ioctl(TIOCSTI)": call("ioctl", 0, 0x5412, 0),
    "ioctl(TIOCLINUX)": call("ioctl", 0, 0x541C, 0),
}
child = call("clone", 0x10000000 | 17, 0, 0, 0, 0)
if child[0] == 0:
    os._exit(0)
seen["clone(CLONE_NEWUSER)"] = child
works = []
thread = threading.Thread(target=lambda: works.append("thread")); thread.start(); thread.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
works.append("fork" if os.waitpid(pid, 0)[1] >> 8 == 7 else "fork failed")
works.append(subprocess.run(["/bin/sh", "-c", "echo exec"], capture_output=True, text=True).stdout.strip())
import socket
with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0)); works.append("socket")
left, right = socket.socketpair(); left.close(); right.close(); works.append("socketpair")
with socket.socket(socket.AF_INET6) as sock:
    works.append("inet6")
with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as sock:
    works.append("netlink")
import fcntl, termios
try:
    fcntl.ioctl(0, termios.FIONREAD, b"    ")
except OSError as exc:  # stdin is a pipe or /dev/null: any answer but the filter's EPERM
    assert exc.errno != errno.EPERM, exc
works.append("ioctl")
print(json.dumps({"seen": seen, "works": works}), flush=True)
if len(sys.argv) > 3:
    call("clone", 0)  # not reached by the x32 case below
"""


def run_filtered(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-c", FILTERED, str(REPO), platform.machine(), *extra],
                          capture_output=True, text=True, timeout=60)


def test_the_filter_refuses_each_call_with_its_errno_and_leaves_threads_fork_exec_sockets_and_ioctls():
    done = run_filtered()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    refused = seccomp.refused()
    for name, (value, err) in result["seen"].items():
        expected = refused.get(name, 97 if name.startswith("socket") else 1)  # EAFNOSUPPORT or EPERM
        assert (value, err) == (-1, expected), (name, value, err)
    assert result["works"] == ["thread", "fork", "exec", "socket", "socketpair", "inet6", "netlink", "ioctl"]


def test_a_call_through_the_x32_table_kills_the_process():
    if platform.machine() != "x86_64":
        pytest.skip("x32 is an x86_64 entry point")
    script = ("import ctypes, sys; sys.path.insert(0, sys.argv[1]); from evaluator.sandbox import seccomp; "
              "libc = ctypes.CDLL(None); libc.prctl(38, 1, 0, 0, 0); seccomp.install(); "
              "print('installed', flush=True); libc.syscall(ctypes.c_long(0x40000000 | 39)); print('survived')")
    done = subprocess.run([sys.executable, "-I", "-c", script, str(REPO)], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["installed"]
    assert done.returncode == -signal.SIGSYS


def test_the_filters_numbers_are_this_machines():
    header = HEADERS.get(platform.machine())
    if header is None or not header.exists():
        pytest.skip(f"no system-call header here ({header})")
    text = header.read_text()
    numbers = {name: int(number) for name, number in re.findall(r"#define __NR(?:3264)?_(\w+)\s+(\d+)\b", text)}
    ours = libc.SYSCALLS[platform.machine()]
    assert {name: numbers.get(name) for name in ours} == ours


def test_every_refused_call_has_a_number_on_each_machine_or_does_not_exist_there():
    for machine, numbers in libc.SYSCALLS.items():
        missing = set(seccomp.refused()) - set(numbers)
        assert missing <= {"iopl", "ioperm"} and (machine == "aarch64" or not missing), (machine, missing)
        program = seccomp.program(machine)
        assert len(program) < 4096 and program[-1] == (0x06, 0, 0, 0x7FFF0000)


def test_a_host_where_the_filter_cannot_be_installed_is_told_so_before_any_rank_starts(monkeypatch):
    from evaluator import sandbox
    assert sandbox._filter_unavailable() is None  # this host installs it
    monkeypatch.setattr(seccomp, "supported", lambda: False)
    assert "no system-call filter is written for this machine" in sandbox._filter_unavailable()
