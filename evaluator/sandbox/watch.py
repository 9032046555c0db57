"""What the side's init watches and how it ends the side: resources per rank, and the kill sweep.

Runs inside the init (PID 1 of the side's namespaces), where /proc shows the side alone.
"""

from __future__ import annotations

import os
import signal
import time

STOP_WAIT_S = 10.0


def usage_by_namespace(count_files: bool) -> dict[str, tuple[int, int]]:
    """(tasks, host memory bytes) of every process but us, summed per user namespace.

    Memory is the resident set plus, when ``count_files``, memory files (memfd) a process holds
    open: their pages are host memory that the resident set does not show until mapped.
    """
    groups: dict[str, list[int]] = {}
    seen: set[tuple[int, int]] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        try:
            namespace = os.readlink(f"/proc/{name}/ns/user")
            with open(f"/proc/{name}/status", "rb") as handle:
                status = handle.read()
        except OSError:
            continue
        threads = rss = 0
        for line in status.splitlines():
            if line.startswith(b"Threads:"):
                threads = int(line.split()[1])
            elif line.startswith(b"VmRSS:"):
                rss = int(line.split()[1]) * 1024
        if count_files:
            rss += memory_files(name, seen)
        group = groups.setdefault(namespace, [0, 0])
        group[0] += threads
        group[1] += rss
    return {k: (v[0], v[1]) for k, v in groups.items()}


def memory_files(pid: str, seen: set[tuple[int, int]]) -> int:
    total = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if not os.readlink(path).startswith("/memfd:"):
                continue
            info = os.stat(path)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
    return total


def kill_everyone() -> None:
    """SIGKILL to every process of the namespace but us, again and again (a process forked during
    one sweep escapes it), until none is left to reap."""
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass  # nobody left to signal; reap what remains
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.005)


def freeze_everyone(timeout_s: float = 5.0) -> bool:
    """SIGSTOP to every process of the namespace but us, again until every thread of every one
    is stopped (a process forked during a sweep escapes it, as in ``kill_everyone``). False if
    that did not happen within ``timeout_s``: the side is then not known to be still."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.kill(-1, signal.SIGSTOP)
        except ProcessLookupError:
            return True  # nobody to stop
        if all_stopped():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0002)


def thaw_everyone() -> None:
    try:
        os.kill(-1, signal.SIGCONT)
    except ProcessLookupError:
        pass


def all_stopped() -> bool:
    """Every thread of every process but us is stopped (or dead): the state in its stat file."""
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        try:
            tasks = os.listdir(f"/proc/{name}/task")
        except OSError:
            continue  # gone
        for tid in tasks:
            if task_state(f"/proc/{name}/task/{tid}/stat") not in "TtZX":
                return False
    return True


def task_state(stat_path: str) -> str:
    """The one-letter state of a task; "X" when it is gone."""
    try:
        with open(stat_path, "rb") as handle:
            data = handle.read()
    except OSError:
        return "X"
    # The name in parentheses may hold spaces or parentheses: the state follows the last ")".
    return data[data.rfind(b")") + 2:data.rfind(b")") + 3].decode() or "X"
