"""The unconfined box: ranks are child processes of the evaluator (or of its zygote).

For hosts without user namespaces, where an operator chose to run anyway; reports say
``sandbox: off``. Ranks still get the clean environment and a private work directory, and each
runs in its own process session so that a kill takes what it started with it; a rank reaps its
orphans, so what it detached (``setsid``, a double fork) is still found below it and stopped too,
unless candidate code undoes that in its own process: only the confined box promises that nothing
outlives a side. CPU ranks are forked from a zygote that imported torch once (zygote.py), which
stays their parent and reports their exits (``ForkedRank``); other launches are plain children.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

from .box import OutputRules, RankLaunch, copy_regular_files
from ..procs import descendants
from .watch import task_state
from .zygote import Zygote
from .zygote import eligible as zygote_eligible


class ForkedRank:
    """A rank forked by the zygote, which stays its parent and reports its exit: what PlainBox
    asks of a ``subprocess.Popen``."""

    def __init__(self, zygote: Zygote, rank: int) -> None:
        self.zygote = zygote
        self.rank = rank
        self.pid = zygote.pids[rank]

    def poll(self) -> Optional[int]:
        code = self.zygote.poll_exits().get(self.rank)
        if code is None and self.zygote.ended:
            return -signal.SIGKILL  # its reporter is gone (killed with the side): so is it, or it will be
        return code

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while (code := self.poll()) is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"rank {self.rank}", timeout)
            self.zygote.poll_exits(min(0.1, max(0.0, deadline - time.monotonic())))
        return code


class PlainBox:
    confined = False

    def __init__(self, side_dir: Path, inbox: Path, device: str = "cpu") -> None:
        self.inbox = inbox
        self.device = device
        self.work = side_dir / "work"
        self.home = self.work / "home"
        for sub in ("tmp", "home", "out"):
            (self.work / sub).mkdir(parents=True, exist_ok=True)
        self.processes: dict[int, Any] = {}  # rank -> subprocess.Popen or ForkedRank
        self.reported: set[int] = set()
        self.zygote: Optional[Zygote] = None

    def start(self, launches: list[RankLaunch]) -> None:
        if self.device == "cpu" and self._start_from_zygote(launches):
            return
        for launch in launches:
            self.processes[launch.rank] = subprocess.Popen(
                launch.argv, env=launch.env, pass_fds=launch.pass_fds, stdin=launch.stdin_fd,
                stdout=launch.log_fd, stderr=launch.log_fd, cwd=str(self.work), start_new_session=True)

    def _start_from_zygote(self, launches: list[RankLaunch]) -> bool:
        """Ranks forked from one import of torch (zygote.py), each in a session of its own; False
        where the zygote declines them (then they start by exec)."""
        specs = [{"rank": l.rank, "argv": l.argv, "env": l.env, "pass_fds": list(l.pass_fds),
                  "log_fd": l.log_fd, "stdin_fd": l.stdin_fd} for l in launches]
        if not zygote_eligible(specs):
            return False
        zygote = Zygote(specs, work=str(self.work), limits={}, device=self.device, rank_uid=0, keep=True)
        if not zygote.wait_started():
            zygote.close()
            return False
        self.zygote = zygote
        self.processes = {rank: ForkedRank(zygote, rank) for rank in sorted(zygote.pids)}
        return True

    def fileno(self) -> Optional[int]:
        return None

    def events(self) -> list[dict[str, Any]]:
        news = []
        for rank, process in self.processes.items():
            code = process.poll()
            if code is not None and rank not in self.reported:
                self.reported.add(rank)
                news.append({"event": "exit", "rank": rank, "code": code})
        return news

    def dump_stacks(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                try:
                    os.kill(process.pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass

    def process_ids(self) -> list[int]:
        return [pid for p in self.processes.values() if p.poll() is None for pid in _descendants(p.pid)]

    def reaper_id(self) -> Optional[int]:
        """The zygote, where the ranks were forked from it; exec'd ranks are the evaluator's own
        children, whose reaped time is not the side's alone."""
        return self.zygote.process.pid if self.zygote is not None else None

    def freeze(self) -> bool:
        """SIGSTOP to every rank and every descendant of it, again until every thread of them
        stands still. Ranks make themselves their orphans' reaper (rank_main), so a double fork
        stays a descendant; what the candidate undoes in its own process it can undo here:
        only the confined box stops everything a side started."""
        roots = [p.pid for p in self.processes.values() if p.poll() is None]
        deadline = time.monotonic() + 5.0
        while True:
            pids = [pid for root in roots for pid in _descendants(root)]
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except (ProcessLookupError, PermissionError):
                    pass
            if all(_stopped(pid) for pid in pids) and sorted(pids) == sorted(
                    pid for root in roots for pid in _descendants(root)):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0002)

    def thaw(self) -> None:
        for pid in [pid for p in self.processes.values() if p.poll() is None for pid in _descendants(p.pid)]:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self, grace_s: float = 2.0) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            live = [p for p in self.processes.values() if p.poll() is None]
            # Detached descendants first (their own session, out of the rank's group): while the
            # rank lives they are still below it (it reaps its orphans, rank_main).
            for pid in [pid for p in live for pid in _descendants(p.pid) if pid != p.pid]:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            for process in live:
                try:
                    os.killpg(process.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + grace_s
            while live and time.monotonic() < deadline:
                live = [p for p in live if p.poll() is None]
                time.sleep(0.02)
        for process in self.processes.values():
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.zygote is not None and all(rank in self.zygote.exits for rank in self.processes):
            self.zygote.close()  # it has reported every rank's exit and is on its way out

    def copy_outputs(self, dest: Path, rules: OutputRules) -> None:
        fd = os.open(self.work / "out", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            copy_regular_files(fd, dest, rules)
        finally:
            os.close(fd)

    def close(self) -> None:
        self.stop()
        if self.zygote is not None:
            self.zygote.close()


def _descendants(root: int) -> list[int]:
    return descendants([root])


def _stopped(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # gone
    return all(task_state(f"/proc/{pid}/task/{tid}/stat") in "TtZX" for tid in tasks)
