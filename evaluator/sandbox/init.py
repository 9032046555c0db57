"""The sandbox's own processes, started as ``python -I -c`` by ``confined.ConfinedBox``.

``main`` (the entry) drops root's supplementary groups, enters a new user namespace and waits for
the evaluating parent to map its ids, then creates mount, network, IPC, UTS and PID namespaces
and forks the side's init, which becomes PID 1 there. The init:

- builds a fresh root on a tmpfs: the system, the interpreter and the harness's packages bound
  read-only, a minimal /dev, a fresh /proc, /sys read-only, and one size-limited tmpfs for the
  work directory, /tmp, /dev/shm and home;
- brings up the loopback (the only interface) and starts the ranks, each in a user namespace of
  its own with no capabilities, no new privileges, resource limits and a system-call filter
  (``seccomp``);
- reports rank exits and resource limits on stdout, and on request signals the ranks (stack
  dumps) or kills every process but itself. When it dies, the kernel kills every process in its
  PID namespace: nothing a candidate starts outlives the side.

Source paths are opened before ids change (O_PATH) and bound through ``/proc/self/fd``, so a
host directory that only root can traverse (``/root/.pyenv``) can still be exposed read-only.
Messages are JSON lines well under PIPE_BUF, so the entry and the init can share the pipe.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import time
from typing import Any

from . import libc, seccomp
from .policy import SANDBOX_UID
from .watch import (MAX_SOCKETS, freeze_everyone, kill_everyone, socket_queue_bytes, thaw_everyone,
                    unattached_shared_memory, usage_by_namespace)
from .zygote import Zygote
from .zygote import eligible as zygote_eligible

START_ATTEMPTS = 3  # a rank whose set-up before exec fails is started again (SideInit._spawn)

NEW_ROOT = "/tmp"  # in our private mount namespace; every source is opened before it is covered
SCAN_INTERVAL_S = 0.1
MiB = 2**20


def send(**event: Any) -> None:
    data = (json.dumps(event)[:3500] + "\n").encode()
    os.write(1, data)


def read_line(fd: int) -> str:
    """One line from ``fd``. The parent writes nothing more until we answer, so no read-ahead."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 65536)
        if not chunk:
            raise EOFError("the evaluator closed the sandbox's control pipe")
        data += chunk
    return data.decode()


def main() -> None:
    try:
        spec = json.loads(read_line(0))
        if os.geteuid() == 0:
            os.setgroups([])  # root's groups would otherwise follow every rank
        libc.unshare(libc.CLONE_NEWUSER)
        send(event="userns")
        if read_line(0).strip() != "mapped":
            raise RuntimeError("the evaluator did not map the sandbox's ids")
        libc.prctl(libc.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != spec["parent_pid"]:
            os._exit(1)
        libc.prctl(libc.PR_SET_DUMPABLE, 0)
        libc.unshare(libc.CLONE_NEWNS | libc.CLONE_NEWNET | libc.CLONE_NEWIPC | libc.CLONE_NEWUTS
                     | libc.CLONE_NEWPID)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
        send(event="error", message=f"{type(exc).__name__}: {exc}")
        os._exit(1)
    pid = os.fork()
    if pid == 0:
        try:
            SideInit(spec).run()
        except BaseException as exc:  # noqa: BLE001
            send(event="error", message=f"{type(exc).__name__}: {exc}")
        os._exit(1)
    send(event="init", pid=pid)
    os.closerange(0, 1)
    os.closerange(3, 1 << 16)  # the ranks' pipes: only the ranks may hold them
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


class SideInit:
    """PID 1 of one side's namespaces."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.limits = spec["limits"]
        self.ranks: dict[int, int] = {}  # pid -> rank
        self.rank_ns: dict[str, int] = {}  # user namespace -> rank
        self.popens: list[subprocess.Popen[bytes]] = []
        self.limit_reported = False
        self.commands = b""
        self.scans = 0
        self.next_scan = 0.0
        self.links: dict[str, str] = {}  # exposed path -> where the link points (open_sources)

    def run(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sources = self.open_sources()
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)  # root of our user namespace: mapped, with its capabilities there
        # Changing ids reset both: die with the entry (and so with the evaluator), and let no
        # rank ptrace us.
        libc.prctl(libc.PR_SET_PDEATHSIG, signal.SIGKILL)
        libc.prctl(libc.PR_SET_DUMPABLE, 0)
        self.build_root(sources)
        loopback_up()
        libc.sethostname("pkb-sandbox")
        self.limit_namespaced_resources()
        self.start_ranks()
        send(event="ready")
        self.serve()

    # -- the filesystem -------------------------------------------------------------------

    def open_sources(self) -> dict[str, int]:
        paths = list(self.spec["exposed"]) + list(self.spec["devices"]) + [self.spec["inbox"], "/sys"]
        sources = {}
        for path in paths:
            if os.path.islink(path) and path in self.spec["exposed"]:
                # Recreated as the same link inside; read now, as the sources are opened: a link
                # below /tmp (a checkout's linked .venv there) is covered by the new root later.
                self.links[path] = os.readlink(path)
                continue
            sources[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        return sources

    def build_root(self, sources: dict[str, int]) -> None:
        libc.mount(None, "/", None, libc.MS_REC | libc.MS_PRIVATE)
        libc.mount("tmpfs", NEW_ROOT, "tmpfs", libc.MS_NOSUID | libc.MS_NODEV, "size=16m,mode=755")
        # The private /tmp, /dev/shm and home first: an exposed path below one of them (a checkout
        # and its venv in /tmp) is then bound inside it instead of being hidden by it.
        self.build_dev(sources)
        self.build_work()
        for path in self.spec["exposed"]:
            if path not in sources:
                target = NEW_ROOT + path
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.symlink(self.links[path], target)
                continue
            bind_read_only(sources[path], NEW_ROOT + path)
        os.makedirs(NEW_ROOT + "/proc")
        libc.mount("proc", NEW_ROOT + "/proc", "proc", libc.MS_NOSUID | libc.MS_NODEV | libc.MS_NOEXEC)
        bind_read_only(sources["/sys"], NEW_ROOT + "/sys")
        bind_read_only(sources[self.spec["inbox"]], NEW_ROOT + self.spec["inbox_inside"])
        os.makedirs(NEW_ROOT + "/.old")
        libc.pivot_root(NEW_ROOT, NEW_ROOT + "/.old")
        os.chdir("/")
        libc.umount("/.old", libc.MNT_DETACH)
        os.rmdir("/.old")
        libc.mount(None, "/", None, libc.MS_REMOUNT | libc.MS_BIND | libc.MS_RDONLY | libc.MS_NOSUID
                   | libc.MS_NODEV)

    def build_dev(self, sources: dict[str, int]) -> None:
        dev = NEW_ROOT + "/dev"
        os.makedirs(dev)
        libc.mount("tmpfs", dev, "tmpfs", libc.MS_NOSUID | libc.MS_NOEXEC, "size=1m,mode=755")
        for node in self.spec["devices"]:
            target = NEW_ROOT + node
            if os.path.isdir(f"/proc/self/fd/{sources[node]}"):
                os.makedirs(target, exist_ok=True)
            else:
                open(target, "w").close()
            libc.mount(f"/proc/self/fd/{sources[node]}", target, None, libc.MS_BIND)
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                             ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
            os.symlink(target, f"{dev}/{name}")
        os.makedirs(f"{dev}/shm")
        libc.mount(None, dev, None, libc.MS_REMOUNT | libc.MS_RDONLY | libc.MS_NOSUID | libc.MS_NOEXEC)

    def build_work(self) -> None:
        work = NEW_ROOT + self.spec["work"]
        os.makedirs(work)
        owner = self.spec["rank_uid"]
        libc.mount("tmpfs", work, "tmpfs", libc.MS_NOSUID | libc.MS_NODEV,
                   f"size={self.limits['disk_bytes']},nr_inodes=1m,mode=755,uid={owner},gid={owner}")
        for name in ("tmp", "shm", "home", "out"):
            os.makedirs(f"{work}/{name}")
            os.chown(f"{work}/{name}", owner, owner)
        os.chmod(f"{work}/tmp", 0o1777)
        os.chmod(f"{work}/shm", 0o1777)
        for name, target in (("tmp", "/tmp"), ("shm", "/dev/shm"), ("home", self.spec["home"])):
            os.makedirs(NEW_ROOT + target, exist_ok=True)
            libc.mount(f"{work}/{name}", NEW_ROOT + target, None, libc.MS_BIND)

    def limit_namespaced_resources(self) -> None:
        """Limits that belong to our user and IPC namespaces, set before any rank exists.

        Each rank gets exactly one user namespace of its own; no process of the side may create
        another (a user namespace of its own would let it mount a tmpfs of any size). System V
        shared memory and message queues live in our IPC namespace; the memory watch does not
        see them, so shared memory is bounded here by the size of the disk budget.
        """
        budget = self.limits["disk_bytes"]
        page = os.sysconf("SC_PAGE_SIZE")
        for path, value in (("/proc/sys/user/max_user_namespaces", len(self.spec["ranks"])),
                            ("/proc/sys/user/max_mnt_namespaces", 0),
                            ("/proc/sys/user/max_net_namespaces", 0),
                            ("/proc/sys/user/max_pid_namespaces", 0),
                            ("/proc/sys/user/max_ipc_namespaces", 0),
                            ("/proc/sys/user/max_uts_namespaces", 0),
                            ("/proc/sys/user/max_cgroup_namespaces", 0),
                            ("/proc/sys/kernel/shmmax", budget),
                            ("/proc/sys/kernel/shmall", budget // page),
                            ("/proc/sys/kernel/shmmni", 64),
                            ("/proc/sys/fs/mqueue/queues_max", 16)):
            with open(path, "w") as handle:
                handle.write(str(value))

    # -- the ranks ------------------------------------------------------------------------

    def start_ranks(self) -> None:
        if self.spec["device"] == "cpu" and zygote_eligible(self.spec["ranks"]) and self._start_ranks_from_zygote():
            return
        for launch in self.spec["ranks"]:
            log = launch["log_fd"]
            popen = self._spawn(launch, log)
            self.popens.append(popen)
            self.ranks[popen.pid] = launch["rank"]
            try:
                self.rank_ns[os.readlink(f"/proc/{popen.pid}/ns/user")] = launch["rank"]
            except OSError:
                pass  # it exited already; its exit is reported below
        for launch in self.spec["ranks"]:
            for fd in {launch["log_fd"], launch["stdin_fd"], *launch["pass_fds"]}:
                os.close(fd)

    def _start_ranks_from_zygote(self) -> bool:
        """Every rank forked from one process that imported torch once (zygote.py). False, with
        nothing started, where the zygote declines (a thread after its imports, a failed import):
        the ranks are then started by exec."""
        launches = self.spec["ranks"]
        zygote = Zygote(launches, work=self.spec["work"], limits=self.limits, device=self.spec["device"],
                        rank_uid=self.spec["rank_uid"], keep=False, nice=self.spec.get("rank_nice", 0))
        try:
            if not zygote.wait_started():
                os.write(2, f"pkb sandbox: ranks started by exec: {zygote.declined}\n".encode())
                return False
        finally:
            zygote.close()  # it exits once every rank runs; its ranks, orphaned, are ours to reap
        for rank, pid in zygote.pids.items():
            self.ranks[pid] = rank
            try:
                self.rank_ns[os.readlink(f"/proc/{pid}/ns/user")] = rank
            except OSError:
                pass  # it exited already; its exit is reported when we reap it
        for launch in launches:
            for fd in {launch["log_fd"], launch["stdin_fd"], *launch["pass_fds"]}:
                os.close(fd)
        return True

    def _spawn(self, launch: dict[str, Any], log: int) -> subprocess.Popen[bytes]:
        """Start one rank. Its set-up before exec failed now and then on a loaded host (twice in
        one day's test runs, each time passing when run again); nothing of the candidate has run
        at that point, so a failed start is retried, and the step that failed is written to the
        rank's log."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return subprocess.Popen(
                    launch["argv"], env=launch["env"], pass_fds=tuple(launch["pass_fds"]),
                    stdin=launch["stdin_fd"], stdout=log, stderr=log, cwd=self.spec["work"],
                    preexec_fn=lambda: drop_privileges(self.limits, self.spec["device"], self.spec["rank_uid"],
                                                       self.spec.get("rank_nice", 0)))
            except subprocess.SubprocessError:
                if attempt == START_ATTEMPTS:
                    raise
                time.sleep(0.1 * attempt)
        raise AssertionError("unreachable")

    def serve(self) -> None:
        while True:
            readable, _, _ = select.select([0], [], [], SCAN_INTERVAL_S)
            if readable:
                chunk = os.read(0, 4096)
                if not chunk:
                    kill_everyone()
                    return
                self.commands += chunk
                *lines, self.commands = self.commands.split(b"\n")
                for line in lines:
                    self.command(line.decode().strip())
            self.reap()
            # On the clock of the scans, not of the commands: a freeze or thaw (the judge's clock
            # runs through them) must not wait for a sweep of /proc.
            if not self.limit_reported and time.monotonic() >= self.next_scan:
                self.next_scan = time.monotonic() + SCAN_INTERVAL_S
                self.check_limits()

    def command(self, name: str) -> None:
        if name == "dump":
            for pid in self.ranks:
                try:
                    os.kill(pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass
        elif name == "freeze":
            # The judge times one side while the other stands still, and reads outputs only
            # once nothing of the side can change them (docs/judge.md). The namespace's last
            # process id, read once every thread stands stopped and again before the thaw: a
            # process made meanwhile was made by one that ran (continued by a SIGCONT it had a
            # timer send), and may be gone before the judge reads the side (red team,
            # forks_burners_while_frozen).
            send(event="frozen", ok=freeze_everyone(), last_pid=last_pid())
        elif name == "thaw":
            before = last_pid()
            thaw_everyone()
            send(event="thawed", last_pid=before)
        elif name == "stop":
            kill_everyone()
            self.reap()
            send(event="stopped")

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            rank = self.ranks.pop(pid, None)
            if rank is not None:
                send(event="exit", rank=rank, code=os.waitstatus_to_exitcode(status))

    def check_limits(self) -> None:
        tasks_limit = self.limits["tasks_per_rank"]
        memory_limit = self.limits["memory_bytes_per_rank"]
        self.scans += 1
        for namespace, (tasks, rss) in usage_by_namespace(count_files=self.scans % 5 == 0).items():
            rank = self.rank_ns.get(namespace)
            who = f"rank {rank}" if rank is not None else "a process"
            if tasks >= tasks_limit - 2:
                return self.over_limit("processes", f"{who} reached the limit of {tasks_limit} processes "
                                       "and threads", rank)
            if rss > memory_limit:
                return self.over_limit("memory", f"{who} used more than the limit of "
                                       f"{memory_limit / 2**30:.3g} GiB of host memory", rank)
        if self.scans % 5 == 0:
            # Host memory no rank's resident set shows: socket queues (UDP's and netlink's, which
            # no cgroup of ours charges; TCP's and unix ones') and System V shared memory no process
            # has attached. The side's together may hold no more than one rank may.
            queued, too_many = socket_queue_bytes()
            queued += unattached_shared_memory()
            if too_many or queued > memory_limit:
                held = f"more than {MAX_SOCKETS:,} sockets" if too_many else f"{queued / 2**30:.3g} GiB"
                return self.over_limit("memory", f"the side held {held} queued in its sockets or in shared memory no "
                                       "process has attached (host memory outside every rank's resident set), past "
                                       f"the limit of {memory_limit / 2**30:.3g} GiB a rank may use", None)
        st = os.statvfs(self.spec["work"])
        total = st.f_blocks * st.f_frsize
        if st.f_bavail * st.f_frsize < max(MiB, total // 100) or st.f_favail < 64:
            self.over_limit("disk", f"the side filled its {total / 2**30:.1f} GiB of disk (work directory, "
                            "/tmp, /dev/shm and home together)", None)

    def over_limit(self, what: str, message: str, rank: int | None) -> None:
        self.limit_reported = True
        send(event="limit", what=what, message=message, rank=rank)
        kill_everyone()


def last_pid() -> int:
    """The last process id given out in our PID namespace: it moves with every process and
    thread started in the side."""
    with open("/proc/sys/kernel/ns_last_pid", "rb") as handle:
        return int(handle.read())


def bind_read_only(source_fd: int, target: str) -> None:
    source = f"/proc/self/fd/{source_fd}"
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "w").close()
    libc.mount(source, target, None, libc.MS_BIND | libc.MS_REC)
    try:
        libc.make_tree_read_only(target)
    except OSError:
        # Kernels before 5.12: the old remount, keeping the flags the host mount is locked with.
        flags = os.statvfs(target).f_flag
        kept = sum(bit for bit in (libc.MS_NOSUID, libc.MS_NODEV, libc.MS_NOEXEC, libc.MS_NOATIME,
                                   libc.MS_NODIRATIME) if flags & bit)
        libc.mount(None, target, None, libc.MS_REMOUNT | libc.MS_BIND | libc.MS_RDONLY | kept)


def loopback_up() -> None:
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def drop_privileges(limits: dict[str, int], device: str, rank_uid: int, nice: int = 0) -> None:
    """In a new rank, before exec: the ranks' uid (another host uid than the init's, where the
    evaluator could map two), a user namespace of its own (uid 1000 there, no capabilities over
    the init's namespaces), no new privileges, and its resource limits."""
    try:
        _drop_privileges(limits, device, rank_uid, nice)
    except BaseException as exc:  # subprocess reports only "Exception occurred in preexec_fn"
        os.write(2, f"pkb sandbox: a rank's set-up before exec failed: {exc!r}\n".encode())
        raise


def _drop_privileges(limits: dict[str, int], device: str, rank_uid: int, nice: int) -> None:
    # The init may run at a higher priority; ranks run at the evaluator's (``nice``, at least 0).
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    if rank_uid != 0:
        os.setresgid(rank_uid, rank_uid, rank_uid)
        os.setresuid(rank_uid, rank_uid, rank_uid)
    libc.prctl(libc.PR_SET_DUMPABLE, 1)  # inherited 0 (or reset by setresuid) hides /proc/self
    libc.unshare(libc.CLONE_NEWUSER)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{SANDBOX_UID} {rank_uid} 1"),
                       ("gid_map", f"{SANDBOX_UID} {rank_uid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["tasks_per_rank"], limits["tasks_per_rank"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["disk_bytes"], limits["disk_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if device == "cpu":  # CUDA reserves far more address space than it uses: GPU ranks are watched
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes_per_rank"], limits["memory_bytes_per_rank"]))
    libc.prctl(libc.PR_SET_NO_NEW_PRIVS, 1)
    # The user namespace just made gave this process every capability over it, and a rank the
    # zygote forked is never exec'd (an exec as uid 1000 there would have dropped them): before
    # this, such ranks held CAP_SYS_ADMIN over a namespace of their own. None is needed.
    libc.drop_capabilities()
    # Last: the filter refuses unshare, which this set-up itself used above.
    seccomp.install()


if __name__ == "__main__":
    main()
