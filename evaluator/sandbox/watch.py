"""What the side's init watches and how it ends the side: resources per rank, and the kill sweep.

Runs inside the init (PID 1 of the side's namespaces), where /proc shows the side alone.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import time

from .net_queues import queued_per_socket

STOP_WAIT_S = 10.0


def usage_by_namespace(count_files: bool) -> dict[str, tuple[int, int]]:
    """(tasks, host memory bytes) of every process but us, summed per user namespace.

    Memory is the resident set plus, when ``count_files``, memory files (memfd) a process holds
    open (their pages are host memory that the resident set does not show until mapped) and its
    pipes' buffers (memory_files).
    """
    groups: dict[str, list[int]] = {}
    seen: set[tuple[int, int]] = set()
    pipes: set[str] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        try:
            namespace = os.readlink(f"/proc/{name}/ns/user")
            with open(f"/proc/{name}/status", "rb") as handle:
                status = handle.read()
        except OSError:
            continue
        threads, rss = _field(status, b"Threads:"), _field(status, b"VmRSS:")
        view = f"/proc/{name}"
        if rss is None:
            # Its main thread has ended alone (the exit system call) while others go on: the
            # process's own status shows no memory and its fd folder is empty. A living thread
            # shows both (red team, hides_memory_behind_an_exited_main_thread: 2.4 GiB unseen).
            view, rss = _living_thread(name)
        # Page tables are host memory of the process's too, and in no resident set: without an
        # address-space limit (GPU ranks) a process's sparse mappings make 256 MiB of them.
        rss = ((rss or 0) + (_field(status, b"VmPTE:") or 0)) * 1024
        if count_files:
            rss += memory_files(view, seen, pipes)
        group = groups.setdefault(namespace, [0, 0])
        group[0] += threads or 0
        group[1] += rss
    return {k: (v[0], v[1]) for k, v in groups.items()}


# Sockets of the side read at most, per reading: honest ranks hold a few per peer (gloo, NCCL's
# bootstrap), and a side with more is held to that alone (socket_queue_bytes). The init reads them
# every 0.5 s at its raised priority, beside whichever side runs: the bound keeps that cheap.
MAX_SOCKETS = 20_000


def socket_queue_bytes() -> tuple[int, bool]:
    """Bytes queued in the side's TCP, UDP, netlink and unix sockets (its network namespace's
    /proc/net files: each socket's send and receive queues; unix_queue_bytes), and whether it
    holds more than MAX_SOCKETS.

    The kernel charges UDP's queues to one pool for the whole host (net.ipv4.udp_mem), TCP's to
    another, neither to the side's memory cgroup (cgroup v1 charges sockets only where asked; GPU
    hosts give the side no cgroup at all), and no process's resident set shows them: rank 0 held
    3 GiB in UDP receive queues under a 2 GiB limit per rank and passed (red team, ninth pass:
    holds_memory_in_udp_queues)."""
    queues, lines, too_many = queued_per_socket("/proc/net", ("udp", "udp6", "tcp", "tcp6"), MAX_SOCKETS)
    queued = sum(queues)
    if too_many:
        return queued, True
    # Netlink's queues belong to no pool of the host at all: one unprivileged process may send to
    # another's NETLINK_USERSOCK socket, 8 MiB a socket (red team, ninth pass:
    # holds_memory_in_netlink_queues). Its columns: sk Eth Pid Groups Rmem Wmem ...
    try:
        with open("/proc/net/netlink", "rb") as handle:
            next(handle, None)
            for line in handle:
                lines += 1
                if lines > MAX_SOCKETS:
                    return queued, True
                fields = line.split()
                if len(fields) >= 6:
                    queued += int(fields[4]) + int(fields[5])
    except (OSError, ValueError):
        pass
    try:
        unix, too_many = unix_queue_bytes(MAX_SOCKETS - lines)
    except (OSError, struct.error):
        return queued, False
    return queued + unix, too_many


def unattached_shared_memory() -> int:
    """Resident bytes of the side's System V shared memory segments that no process has attached
    (its IPC namespace's /proc/sysvipc/shm): an attached segment is in its processes' resident
    sets; a detached one in none. Rank 0 held 3 GiB in three detached segments under a 2 GiB limit
    per rank (red team, ninth pass: holds_memory_in_sysv_shm); the init bounds the namespace's
    segments to the disk budget (limit_namespaced_resources), which the disk's own check does not
    see either."""
    total = 0
    try:
        with open("/proc/sysvipc/shm", "rb") as handle:
            header = handle.readline().split()
            nattch, rss = header.index(b"nattch"), header.index(b"rss")
            for line in handle:
                fields = line.split()
                if len(fields) > max(nattch, rss) and fields[nattch] == b"0":
                    total += int(fields[rss])
    except (OSError, ValueError):
        pass
    return total


# sock_diag (linux/sock_diag.h, linux/unix_diag.h): a dump of the namespace's unix sockets, each
# with its queues (UNIX_DIAG_RQLEN: bytes waiting to be read, and bytes its sends still hold).
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY = 4, 20
_NLM_F_REQUEST_DUMP = 0x1 | 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_UDIAG_SHOW_RQLEN, _UNIX_DIAG_RQLEN = 0x10, 4
_UNIX_DIAG_MSG = 16  # family, type, state, pad, inode, cookie[2]


def unix_queue_bytes(max_sockets: int = MAX_SOCKETS) -> tuple[int, bool]:
    """Bytes the namespace's unix sockets hold: what each socket's sends still hold (a stream's
    bytes queued at its peer, a datagram's until read), for the listening ones nothing; and
    whether there are more than ``max_sockets``. /proc/net/unix shows no queue, so the kernel is
    asked (sock_diag), as ``ss -x`` asks it.

    Unix sockets' queues are charged to a side's memory cgroup where there is one (a cgroup v1
    capped at 2 GiB held 1.1 GB of them, all of it charged), but to no rank's resident set, and
    where the host gives no cgroup (the GPU hosts) to nothing (red team, ninth pass:
    holds_memory_in_unix_queues)."""
    request = struct.pack("=IHHII", 16 + 24, _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST_DUMP, 1, 0) + \
        struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, _UDIAG_SHOW_RQLEN, 0, 0)
    held = sockets = 0
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG) as diag:
        diag.settimeout(2.0)
        diag.send(request)
        while True:
            data = diag.recv(1 << 16)
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if length < 16 or kind in (_NLMSG_DONE, _NLMSG_ERROR):
                    return held, False
                sockets += 1
                if sockets > max_sockets:
                    return held, True
                attr = offset + 16 + _UNIX_DIAG_MSG
                while attr + 4 <= offset + length:
                    attr_length, attr_kind = struct.unpack_from("=HH", data, attr)
                    if attr_length < 4:
                        break
                    if attr_kind == _UNIX_DIAG_RQLEN and attr_length >= 12:
                        state = data[offset + 16 + 2]
                        if state != 10:  # TCP_LISTEN: its numbers count connections, not bytes
                            held += struct.unpack_from("=I", data, attr + 8)[0]  # its sends' bytes
                    attr += (attr_length + 3) & ~3
                offset += (length + 3) & ~3


def _field(status: bytes, name: bytes) -> int | None:
    """A number from a /proc status file (kB for memory), None where the line is missing."""
    for line in status.splitlines():
        if line.startswith(name):
            return int(line.split()[1])
    return None


def _living_thread(pid: str) -> tuple[str, int | None]:
    """The /proc folder of a thread of ``pid`` that still holds its memory, and its resident kB."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return f"/proc/{pid}", None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status", "rb") as handle:
                rss = _field(handle.read(), b"VmRSS:")
        except OSError:
            continue
        if rss is not None:
            return f"/proc/{pid}/task/{tid}", rss
    return f"/proc/{pid}", None


PIPE_BYTES = 16 * 4096  # what a pipe's buffer holds by default, counted for each pipe a process holds


def memory_files(view: str, seen: set[tuple[int, int]], pipes: set[str] | None = None) -> int:
    """Bytes of the memory files open in ``view`` (a process's /proc folder, or a thread's) not
    already in ``seen``, and of the pipes not already in ``pipes`` (PIPE_BYTES each)."""
    pipes = set() if pipes is None else pipes
    total = 0
    try:
        fds = os.listdir(f"{view}/fd")
    except OSError:
        return 0
    for fd in fds:
        path = f"{view}/fd/{fd}"
        try:
            target = os.readlink(path)
            if target.startswith("pipe:"):
                # A pipe's buffer is kernel memory no resident set shows: a default pipe's 16 pages
                # (one past the user's soft limit gets 2; one enlarged, at most that limit's 64 MiB
                # in all). 220,000 pipes of 110 helpers held 1.8 GB beside a rank under its 2 GiB
                # limit (red team, ninth pass: holds_memory_in_pipes).
                if target not in pipes:
                    pipes.add(target)
                    total += PIPE_BYTES
                continue
            if not target.startswith("/memfd:"):
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


# The head of a stat line holds the state: "pid (name) S ...", the name at most 16 bytes (the
# kernel's TASK_COMM_LEN) and no ")" after it, the rest being numbers.
_STAT_HEAD = 256


def task_state(stat_path: str) -> str:
    """The one-letter state of a task; "X" when it is gone. Read with one open and one read of
    the line's head, no file object: a freeze reads every thread of the side until all stand
    stopped (about 80 of two CUDA ranks, each sweep on the judge's clock), and a buffered open
    took twice as long (2.3 against 1.1 ms a sweep of 81 threads on the 2-core machine)."""
    try:
        fd = os.open(stat_path, os.O_RDONLY)
    except OSError:
        return "X"
    try:
        data = os.read(fd, _STAT_HEAD)
    except OSError:
        return "X"
    finally:
        os.close(fd)
    # The name in parentheses may hold spaces or parentheses: the state follows the last ")".
    end = data.rfind(b")")
    return data[end + 2:end + 3].decode() or "X" if end >= 0 else "X"
