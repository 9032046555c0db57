"""The confined box: one side's ranks inside Linux namespaces, set up by ``sandbox.init``.

The evaluator (this process) starts the sandbox's entry, maps its user namespace (root of the
namespace is an unprivileged host uid when we are root, else our own uid), and then talks to
the side's init over two pipes. Output files are read from the init's root through
``/proc/<init>/root``, after every other process of the side is dead, one path component at a
time without following links.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

from ..config import ResourceLimits
from .box import OutputRules, RankLaunch, SandboxError, copy_regular_files
from .cgroup import SideCgroup, side_cgroup
from ..bytecode_cache import ranks_cache
from .policy import HOME, INBOX, REPO_ROOT, WORK, device_nodes, exposed_paths

# The host uid that is root inside a side when the evaluator runs as root: owns nothing on the
# host, so the side can write nothing there and signal nothing of ours.
SANDBOX_HOST_ID = int(os.environ.get("PKB_SANDBOX_HOST_ID", "1610612736"))
INIT_NICE = -10  # a higher priority than the ranks' (nice 0), which they cannot take
RANK_ID_INSIDE = 1000  # the ranks' id in the init's namespace, when there are two to map
SETUP_TIMEOUT_S = 90.0
OOM_CHECK_S = 0.05  # between two readings of the side's OOM-kill count while nothing else happens
FREEZE_TIMEOUT_S = 10.0  # the init's sweep gives up after 5 s and says so  # generous: a loaded host can stall process start for a long time
ENTRY = (f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r}); "
         "from evaluator.sandbox.init import main; main()")


class ConfinedBox:
    confined = True

    def __init__(self, side_dir: Path, inbox: Path, device: str, resources: ResourceLimits) -> None:
        self.side_dir = side_dir
        self.host_inbox = inbox
        self.device = device
        self.resources = resources
        self.inbox, self.work, self.home = INBOX, WORK, HOME
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.init_pid: Optional[int] = None
        self.init_pidfd: Optional[int] = None
        self.buffer = b""
        self.pending: list[dict[str, Any]] = []
        self.cgroup: Optional[SideCgroup] = None
        self.oom_reported = False
        self.oom_checked_at = 0.0
        self.lost = False
        self.frozen_last_pid: Optional[int] = None  # the namespace's last process id at the freeze
        self.started_while_frozen = False

    def start(self, launches: list[RankLaunch]) -> None:
        spec = {
            "parent_pid": os.getpid(), "device": self.device, "exposed": exposed_paths(extra=[c for c in (ranks_cache(),) if c]),
            "rank_uid": RANK_ID_INSIDE if os.geteuid() == 0 else 0,
            # Ranks run at the evaluator's own priority (a nice'd evaluator's ranks too), never above 0.
            "rank_nice": max(0, os.getpriority(os.PRIO_PROCESS, 0)),
            "devices": device_nodes(self.device), "inbox": str(self.host_inbox),
            "inbox_inside": str(INBOX), "work": str(WORK), "home": str(HOME),
            "limits": {"tasks_per_rank": self.resources.tasks_per_rank, "open_files": self.resources.open_files,
                       "disk_bytes": self.resources.disk_bytes,
                       "memory_bytes_per_rank": self.resources.memory_bytes_per_rank},
            "ranks": [{"rank": l.rank, "argv": l.argv, "env": l.env, "pass_fds": list(l.pass_fds),
                       "log_fd": l.log_fd, "stdin_fd": l.stdin_fd} for l in launches],
        }
        fds = sorted({fd for l in launches for fd in (*l.pass_fds, l.log_fd, l.stdin_fd)})
        with open(self.side_dir / "sandbox.log", "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-c", ENTRY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log, pass_fds=fds, start_new_session=True, env={"PATH": os.environ.get("PATH", "")})
        try:
            self.cap_memory(self.process.pid, len(launches))  # the entry waits for its spec: nothing runs yet
            self._send(json.dumps(spec))
            self._expect("userns")
            map_ids(self.process.pid)
            self._send("mapped")
            self.init_pid = int(self._expect("init")["pid"])
            # Its parent (the entry) waits for it, so the number cannot be reused before this.
            try:
                self.init_pidfd = os.pidfd_open(self.init_pid)
            except ProcessLookupError:
                # Already gone and reaped (a side whose ranks exited at once, on a loaded host):
                # nothing of it is left to watch, stop or copy from.
                self.init_pidfd = None
            if os.geteuid() == 0 and self.init_pidfd is not None:
                # The init must keep up with a fork bomb's busy processes to stop them.
                os.setpriority(os.PRIO_PROCESS, self.init_pid, INIT_NICE)
            self._expect("ready")
        except BaseException:
            self.close()
            raise

    def cap_memory(self, pid: int, ranks: int) -> None:
        """Put the side in a memory cgroup of its own where the host has one for us (cgroup.py):
        every rank's share plus the disk, whose tmpfs pages are charged there too."""
        self.cgroup = side_cgroup()
        if self.cgroup is None:
            return
        try:
            self.cgroup.limit(max(ranks, 1) * self.resources.memory_bytes_per_rank + self.resources.disk_bytes)
            self.cgroup.add(pid)
        except OSError:
            self.cgroup.remove()
            self.cgroup = None

    def _send(self, line: str) -> None:
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(line.encode() + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            raise SandboxError(f"the sandbox exited during set-up: {self._log_tail()}") from None

    def _expect(self, name: str, timeout_s: float = SETUP_TIMEOUT_S) -> dict[str, Any]:
        """Wait for event ``name``; every other event (a rank that exits at once) is kept."""
        deadline = time.monotonic() + timeout_s
        events, self.pending = self.pending, []  # what an earlier read brought along comes first
        while True:
            for index, event in enumerate(events):
                if event.get("event") == "error":
                    raise SandboxError(f"sandbox set-up failed: {event.get('message')}")
                if event.get("event") == name:
                    self.pending += events[index + 1:]
                    return event
                self.pending.append(event)
            if time.monotonic() > deadline:
                raise SandboxError(f"the sandbox did not say {name!r} within {timeout_s:.0f} s")
            events = self._read(max(0.0, deadline - time.monotonic()))

    def _read(self, timeout: float) -> list[dict[str, Any]]:
        assert self.process is not None and self.process.stdout is not None
        fd = self.process.stdout.fileno()
        readable, _, _ = select.select([fd], [], [], timeout)
        if not readable:
            return []
        chunk = os.read(fd, 65536)
        if not chunk:
            raise SandboxError(f"the sandbox exited (status {self.process.wait()}): {self._log_tail()}")
        *lines, self.buffer = (self.buffer + chunk).split(b"\n")
        events = []
        for line in lines:
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        return events

    def _log_tail(self) -> str:
        try:
            return (self.side_dir / "sandbox.log").read_text(errors="replace")[-2000:].strip() or "no output"
        except OSError:
            return "no output"

    def fileno(self) -> Optional[int]:
        if self.process is None or self.process.stdout is None or self.process.stdout.closed:
            return None
        return self.process.stdout.fileno()

    def events(self) -> list[dict[str, Any]]:
        news, self.pending = self.pending, []
        try:
            news += [] if self.lost else self._read(0.0)
        except SandboxError as exc:
            # The init died: the kernel killed the whole side with it.
            self.lost = True
            news.append({"event": "lost", "message": str(exc)})
        if self.cgroup is not None and not self.oom_reported and self._oom_check_due(news) \
                and self.cgroup.oom_kills():
            self.oom_reported = True
            news.insert(0, {"event": "limit", "what": "memory", "rank": None,
                            "message": f"the side reached its cap of {self.cgroup.limit_bytes / 2**30:.3g} GiB "
                                       "of host memory (all ranks, their files and disk together)"})
        return [e for e in news if e.get("event") in ("exit", "limit", "lost")]

    def _oom_check_due(self, news: list[dict[str, Any]]) -> bool:
        """Whether to read the cgroup's OOM count now: whenever the init reported something (a
        process's exit among others, so that a kill for memory is named as one), else at most every
        OOM_CHECK_S. The judge polls between every two calls of a block, and reading a cgroup file
        cost more than the rest of the poll (py-spy, 2026-11-27)."""
        now = time.monotonic()
        if news or now - self.oom_checked_at >= OOM_CHECK_S:
            self.oom_checked_at = now
            return True
        return False

    def dump_stacks(self) -> None:
        self._command("dump")

    def _command(self, name: str) -> bool:
        try:
            self._send(name)
            return True
        except SandboxError:
            return False

    def process_ids(self) -> list[int]:
        """Host ids of every process of the side but the init (whose scans are ours)."""
        if self.init_pid is None:
            return []
        from ..procs import descendants

        return [pid for pid in descendants([self.init_pid]) if pid != self.init_pid]

    def reaper_id(self) -> Optional[int]:
        return self.init_pid

    def freeze(self) -> bool:
        """Stop every process of the side (the init's SIGSTOP sweep); True once all stand still."""
        if not self._command("freeze"):
            return False
        try:
            frozen = self._expect("frozen", FREEZE_TIMEOUT_S)
        except SandboxError:
            return False
        self.frozen_last_pid = frozen.get("last_pid") if frozen.get("ok") else None
        return bool(frozen.get("ok"))

    def thaw(self) -> None:
        """Continue the side; ``started_while_frozen`` then says whether a process or thread was
        started in it since it was frozen (the namespace's last process id moved)."""
        self.started_while_frozen = False
        if self._command("thaw"):
            try:
                thawed = self._expect("thawed", FREEZE_TIMEOUT_S)
            except SandboxError:
                return  # the side is gone: its exit is what gets reported
            self.started_while_frozen = self.frozen_last_pid is not None and \
                thawed.get("last_pid") != self.frozen_last_pid
        self.frozen_last_pid = None

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        if self._command("stop"):
            try:
                self._expect("stopped")
            except SandboxError:
                self.close()

    def copy_outputs(self, dest: Path, rules: OutputRules) -> None:
        dest.mkdir(parents=True, exist_ok=True)  # without outputs the judge says what is missing
        if self.init_pidfd is None:
            return
        fds: list[int] = []
        try:
            fds.append(os.open(f"/proc/{self.init_pid}", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
            # That directory belongs to whatever process has the number now: ours only if our
            # init is still alive (its pidfd not readable) after we opened it.
            if select.select([self.init_pidfd], [], [], 0)[0]:
                return
            for part in ("root", *WORK.parts[1:], "out"):
                flags = os.O_DIRECTORY | os.O_CLOEXEC | (os.O_PATH if part == "root" else os.O_RDONLY | os.O_NOFOLLOW)
                fds.append(os.open(part, flags, dir_fd=fds[-1]))
            copy_regular_files(fds[-1], dest, rules)
        except OSError:
            return
        finally:
            for fd in fds:
                os.close(fd)

    def close(self) -> None:
        if self.process is None:
            return
        for pid in (self.init_pid, self.process.pid):
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)  # the init's death takes its whole PID namespace
                except (ProcessLookupError, PermissionError):
                    pass
        for stream in (self.process.stdin, self.process.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            # The entry exits once the kernel has reaped every process of the side.
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        if self.init_pidfd is not None:
            os.close(self.init_pidfd)
            self.init_pidfd = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        self.process = None


def rank_host_id(pid: int) -> int:
    """The host uid of a box's ranks: one of its own, different from every other box alive (the
    other side's, another evaluation's), taken from the box's entry process id, unique while it
    lives. The kernel counts some limits per host user, whatever the namespace: epoll watches
    (fs.epoll.max_user_watches), pipe buffers (fs.pipe-user-pages-soft). With one id for both
    sides' ranks, the candidate's ranks spent every epoll watch at import, the reference's gloo
    could not watch its connections (ENOSPC), its rank died in its start-up, and a wrong
    candidate ended as our harness_error (red team, exhausts_the_shared_uids_epoll_watches)."""
    return SANDBOX_HOST_ID + 1 + pid


def map_ids(pid: int) -> None:
    """Make the sandbox's root an unprivileged host id, and its ranks another one, so that no
    rank can touch the init (prlimit, signals and ptrace only check ids). Without root we can
    map only our own id: the init and the ranks then share it, and the init's remaining
    protection is its PID-1 status and its not being dumpable."""
    if os.geteuid() == 0:
        ids = f"0 {SANDBOX_HOST_ID} 1\n{RANK_ID_INSIDE} {rank_host_id(pid)} 1\n"
        Path(f"/proc/{pid}/uid_map").write_text(ids)
        Path(f"/proc/{pid}/gid_map").write_text(ids)
        return
    Path(f"/proc/{pid}/setgroups").write_text("deny")
    Path(f"/proc/{pid}/uid_map").write_text(f"0 {os.geteuid()} 1\n")
    Path(f"/proc/{pid}/gid_map").write_text(f"0 {os.getegid()} 1\n")
