"""Starts one side's rank processes, watches their progress, and kills them when they stall.

Each rank runs in its own process session, so a kill takes the candidate's child processes with
it. A rank that makes no progress within the limit gets SIGUSR1 first (its Python stacks are
dumped by faulthandler), then every rank gets SIGTERM and, after a grace period, SIGKILL: peers of
a stuck rank spin forever in their collectives, so all of them go.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from .channel import DONE, ERROR, READY, STEP, TIMES, TOKEN_ENV, new_token, parse_lines
from .config import Limits
from .report import Failure, FailureClass, make_failure
from .safety import NO_MULTICAST_ENV

REPO_ROOT = Path(__file__).resolve().parent.parent
TAIL_BYTES = 6000
MAX_LINE_BYTES = 1 << 20


@dataclass
class RankState:
    rank: int
    process: subprocess.Popen[bytes]
    fd: int
    buffer: bytes = b""
    started: bool = False
    timing: bool = False  # inside the timed phase, which has a limit of its own
    finished: bool = False
    labels: list[str] = field(default_factory=list)  # "task:step" of every completed step
    last_progress: float = field(default_factory=time.monotonic)


@dataclass
class SideResult:
    side: str
    failure: Optional[Failure]
    ready: dict[int, dict[str, Any]]
    done: dict[int, dict[str, Any]]
    times: dict[tuple[int, int], dict[str, Any]]  # (task, rank) -> TIMES event
    errors: list[dict[str, Any]]  # ERROR events by arrival
    wall_s: float
    steps: dict[int, list[str]] = field(default_factory=dict)  # rank -> "task:step" labels completed
    fingerprints: dict[tuple[int, str, int], list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def completed_steps(self, rank: int) -> list[str]:
        return self.steps.get(rank, [])


def rank_env(device: str, threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(NO_MULTICAST_ENV)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


ProgressHook = Callable[[str, dict[str, Any]], None]


class SideRun:
    def __init__(self, job: dict[str, Any], workdir: Path, limits: Limits, timing_s: float,
                 on_progress: Optional[ProgressHook] = None) -> None:
        self.on_progress = on_progress
        self.token = new_token()
        self.job = job
        self.side = job["side"]
        self.workdir = workdir
        self.limits = limits
        self.timing_s = timing_s
        self.ranks: list[RankState] = []
        self.ready: dict[int, dict[str, Any]] = {}
        self.done: dict[int, dict[str, Any]] = {}
        self.times: dict[tuple[int, int], dict[str, Any]] = {}
        self.errors: list[dict[str, Any]] = []
        self.crashes: list[tuple[int, int]] = []  # (rank, returncode) of ranks that died silently
        self.first_problem_at: Optional[float] = None
        self.fingerprints: dict[tuple[int, str, int], list[dict[str, Any]]] = {}  # (task, step, rank)

    def log_path(self, rank: int) -> Path:
        return self.workdir / f"{self.side}-rank{rank}.log"

    def start(self) -> None:
        job_path = self.workdir / f"{self.side}-job.json"
        job_path.write_text(json.dumps(self.job))
        env = rank_env(self.job["device"], self.job.get("threads", 1))
        env[TOKEN_ENV] = self.token
        for rank in range(self.job["world_size"]):
            read_fd, write_fd = os.pipe()
            with open(self.log_path(rank), "wb") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "evaluator.rank_main", str(job_path), str(rank), str(write_fd)],
                    pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, env=env, cwd=str(self.workdir))
            os.close(write_fd)
            self.ranks.append(RankState(rank, process, read_fd))

    def run(self) -> SideResult:
        started = time.monotonic()
        self.start()
        failure: Optional[Failure] = None
        selector = selectors.DefaultSelector()
        for state in self.ranks:
            selector.register(state.fd, selectors.EVENT_READ, state)
        try:
            failure = self._watch(selector, started)
        finally:
            selector.close()
            self.kill_all()
            for state in self.ranks:
                os.close(state.fd)
        return SideResult(self.side, failure, self.ready, self.done, self.times, self.errors,
                          time.monotonic() - started, {s.rank: s.labels for s in self.ranks},
                          self.fingerprints)

    def _watch(self, selector: selectors.BaseSelector, started: float) -> Optional[Failure]:
        while True:
            for key, _ in selector.select(timeout=0.2):
                state: RankState = key.data
                chunk = os.read(state.fd, 65536)
                if not chunk:
                    selector.unregister(state.fd)
                    continue
                events, state.buffer = parse_lines(state.buffer + chunk)
                if len(state.buffer) > MAX_LINE_BYTES:
                    state.buffer = b""  # no real message is this long: never let a rank fill our memory
                for event in events:
                    self._on_event(state, event)
            now = time.monotonic()
            for state in self.ranks:
                returncode = state.process.poll()
                if returncode is not None and not state.finished and state.rank not in {r for r, _ in self.crashes} \
                        and not any(e.get("rank") == state.rank for e in self.errors):
                    # Read what is left in its pipe before calling it a crash.
                    if state.fd in selector.get_map():
                        continue
                    if returncode == 0 and state.rank in self.done:
                        state.finished = True
                        continue
                    self.crashes.append((state.rank, returncode))
                    self.first_problem_at = self.first_problem_at or now
            if all(state.finished for state in self.ranks):
                return None
            if self.first_problem_at is not None:
                all_exited = all(s.process.poll() is not None for s in self.ranks)
                if all_exited or now - self.first_problem_at > self.limits.error_grace_s:
                    return self._failure_from_problems()
                continue
            stalled = [s for s in self.ranks if not s.finished and now - s.last_progress > self._limit(s)]
            if stalled or now - started > self.limits.total_s:
                return self._deadlock(now - started > self.limits.total_s)

    def _limit(self, state: RankState) -> float:
        if not state.started:
            return self.limits.startup_s
        return max(self.timing_s, self.limits.step_s) if state.timing else self.limits.step_s

    def _on_event(self, state: RankState, event: dict[str, Any]) -> None:
        # The pipe says which rank wrote, not the message: candidate code shares the process.
        event["rank"] = state.rank
        kind = event.get("event")
        if event.pop("token", None) != self.token:
            return  # stray or forged writes to the channel prove nothing
        if kind not in (READY, STEP, TIMES, DONE, ERROR):
            return
        state.last_progress = time.monotonic()
        if self.on_progress is not None and state.rank == 0 and kind in (READY, STEP, TIMES, DONE):
            self.on_progress(self.side, {"event": kind, "step": event.get("step"), "task": event.get("task")})
        if kind == READY:
            state.started = True
            self.ready[state.rank] = event
        elif kind == STEP:
            state.labels.append(f"{event.get('task')}:{event.get('step')}")
            if isinstance(event.get("fingerprints"), list):
                self.fingerprints[(int(event.get("task") or 0), str(event.get("step")), state.rank)] = \
                    event["fingerprints"]
            state.timing = bool(event.get("timing"))
        elif kind == TIMES:
            state.timing = False
            self.times[(int(event.get("task") or 0), state.rank)] = event
            state.labels.append(f"{event.get('task')}:timing")
        elif kind == DONE:
            # Finished only once the process has also exited cleanly (see _watch).
            self.done[state.rank] = event
        elif kind == ERROR:
            self.errors.append(event)
            self.first_problem_at = self.first_problem_at or time.monotonic()

    def _stderr(self) -> dict[str, str]:
        return {str(s.rank): _tail(self.log_path(s.rank)) for s in self.ranks}

    def _failure_from_problems(self) -> Failure:
        # A rank that died silently comes first: its peers' errors ("connection reset by peer",
        # "remote process exited") are the consequence, not the cause.
        if self.errors and not self.crashes:
            first = self.errors[0]
            try:
                failure_class = FailureClass(first.get("failure_class"))
            except ValueError:
                failure_class = FailureClass.RUNTIME_ERROR
            if self.side == "reference":
                failure_class = FailureClass.HARNESS_ERROR
            rank = first.get("rank")
            return make_failure(failure_class, f"rank {rank}: {first.get('message')}", rank=rank,
                            traceback=first.get("traceback"), compiler_output=first.get("compiler_output"),
                            stderr=self._stderr())
        rank, returncode = self.crashes[0]
        if returncode < 0:
            how = f"was killed by {_signal_name(returncode)}"
            if returncode == -signal.SIGKILL:
                how += " (the kernel's out-of-memory killer does this)"
        else:
            how = f"exited with status {returncode} without reporting a result"
        failure_class = FailureClass.HARNESS_ERROR if self.side == "reference" else FailureClass.CRASH
        tail = _tail(self.log_path(rank))
        if "out of memory" in tail.lower():
            failure_class = FailureClass.OUT_OF_MEMORY if self.side != "reference" else failure_class
        return make_failure(failure_class, f"rank {rank} {how} {self._progress(rank)}", rank=rank,
                        stderr=self._stderr())

    def _plan(self) -> list[tuple[str, str]]:
        """(label, description) of every step a rank reports, in order."""
        tasks = self.job["tasks"]
        plan = []
        for task in tasks:
            where = f" of {task['problem']}" if len(tasks) > 1 else ""
            for trial in task["trials"]:
                plan.append((f"{task['task']}:trial {trial['index']}", f"trial {trial['index']}{where}"))
            if task.get("timing"):
                plan.append((f"{task['task']}:timing", f"timing{where}"))
        return plan

    def _progress(self, rank: int) -> str:
        state = self.ranks[rank]
        if not state.started:
            return "during start-up (process group, import of the solution, compilation)"
        plan = self._plan()
        done = [label for label in state.labels if not label.endswith("timing started")]
        if len(done) >= len(plan):
            return "after its last step"
        step = plan[len(done)][1]
        return f"during {step}" if step.startswith("timing") else f"in {step}"

    def _deadlock(self, over_total: bool) -> Failure:
        stacks = self.dump_stacks()
        progress = {s.rank: len(s.labels) + (1 if s.started else 0) for s in self.ranks if not s.finished}
        least = min(progress.values())
        stuck = sorted(rank for rank, n in progress.items() if n == least)
        ahead = sorted(set(range(len(self.ranks))) - set(stuck))
        where = self._progress(stuck[0])
        limit = self.limits.total_s if over_total else self._limit(self.ranks[stuck[0]])
        message = (f"rank{'s' if len(stuck) > 1 else ''} {', '.join(map(str, stuck))} made no progress for "
                   f"{limit:.0f} s {where}")
        if ahead:
            message += f" while rank{'s' if len(ahead) > 1 else ''} {', '.join(map(str, ahead))} went further"
        message += ": deadlock or timeout; every rank was killed"
        failure_class = FailureClass.HARNESS_ERROR if self.side == "reference" else FailureClass.DEADLOCK
        return make_failure(failure_class, message, rank=stuck[0], stacks=stacks, stderr=self._stderr())

    def dump_stacks(self) -> dict[str, str]:
        live = [s for s in self.ranks if s.process.poll() is None]
        for state in live:
            try:
                os.kill(state.process.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        time.sleep(1.0 if live else 0)
        stacks = {}
        for state in self.ranks:
            text = _tail(Path(self.job["stack_dir"]) / f"rank{state.rank}.txt")
            if text:
                stacks[str(state.rank)] = text
        return stacks

    def kill_all(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            live = [s for s in self.ranks if s.process.poll() is None]
            for state in live:
                try:
                    os.killpg(state.process.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + self.limits.kill_grace_s
            while live and time.monotonic() < deadline:
                live = [s for s in live if s.process.poll() is None]
                time.sleep(0.05)
        for state in self.ranks:
            try:
                state.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def run_side(job: dict[str, Any], workdir: Path, limits: Limits, timing_s: float,
             on_progress: Optional[ProgressHook] = None) -> SideResult:
    return SideRun(job, workdir, limits, timing_s, on_progress).run()
