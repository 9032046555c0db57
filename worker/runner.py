"""Runs the evaluator CLI on one job in its own process session, under a hard time limit."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from contract.gpu import NO_MULTICAST_ENV
from contract.job import EvalJob
from contract.progress import parse_line
from evaluator.sandbox import libc

from . import progress
from .config import CODE_ROOT, default_eval_command
from .progress import Progress
from .warm import WarmChild, WarmEvaluator

OUTPUT_TAIL = 20_000
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunResult:
    report: dict[str, Any] | None
    exit_code: int | None
    timed_out: bool
    output_tail: str
    seconds: float


def _kill_session(proc: subprocess.Popen[bytes], grace_s: float = 3.0) -> None:
    # Every rank must die: a peer spinning on a flag never times out by itself.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


def evaluator_env() -> dict[str, str]:
    """The evaluator's environment: the worker's, with multicast off and the worker's own code
    root first on PYTHONPATH (the evaluator runs in a temporary directory, and a GPU host has
    the checkout, not an installed package)."""
    path = [str(CODE_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, **NO_MULTICAST_ENV, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(path)}


def _pump(stream: Any, sink: list[str], tracker: progress.Tracker,
          on_progress: Callable[[Progress], None], job_id: str, started: float) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace")
        event = parse_line(line)
        if event is None:
            sink.append(line)  # progress lines stay out of the tail a failure shows
            continue
        # Each step with its time since the job started: where a job's seconds go, in the
        # worker's own log (start-up, builds, trials, timing), without asking the evaluator.
        # A candidate's rank writes its side's steps: quoted and cut, they cannot forge log lines.
        log.info("job %s +%.1f s: %s %s %.200r", job_id, time.monotonic() - started, event["side"],
                 event.get("event"), event.get("step") or "")
        if (step := tracker.feed(event)) is not None:
            on_progress(step)


def run(job: EvalJob, eval_command: list[str], timeout_s: float,
        on_progress: Callable[[Progress], None] = lambda _: None, extra: tuple[str, ...] = (),
        sweep: bool = False) -> RunResult:
    """Runs `pkb eval --progress` for ``job`` (``sweep``: its `pkb sweep`), killed after
    ``timeout_s``; ``on_progress`` gets each step as rank 0 of a side reports. The evaluator's
    own deadline is a margin shorter."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"pkb-{job.submission_id}-") as tmp:
        solution = Path(tmp) / "solution.py"
        solution.write_text(job.source, encoding="utf-8")
        env = evaluator_env()
        # The report comes back on a pipe only `pkb eval` holds (its ranks never inherit it), not
        # as a file that something outliving the run could rewrite before we read it.
        report_r, report_w = os.pipe()
        try:
            build = job.sweep_command if sweep else job.command
            command = build(eval_command, solution, report_w, timeout_s, extra)
            # Killed with this worker (a SIGKILLed worker cannot kill the session it started); the
            # sandbox's ranks die with the evaluator, and the job is redelivered and run afresh.
            proc = _warm_spawn(eval_command, command, tmp, env, report_w, job.device == "cuda") or subprocess.Popen(
                command, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True, pass_fds=(report_w,), preexec_fn=libc.dies_with(os.getpid()))
        finally:
            os.close(report_w)
        lines: list[str] = []
        chunks: list[bytes] = []
        tracker = progress.Tracker(job.trials, job.device)
        pump = threading.Thread(target=_pump, args=(proc.stdout, lines, tracker, on_progress,
                                                     str(job.submission_id), started), daemon=True)
        reader = threading.Thread(target=_read_all, args=(report_r, chunks), daemon=True)
        pump.start()
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill_session(proc)  # also reaps ranks the CLI left behind
        pump.join(timeout=5)
        reader.join(timeout=5)
        report = None
        if chunks and not timed_out and not reader.is_alive():
            try:
                report = json.loads(b"".join(chunks))
            except ValueError:
                report = None
        return RunResult(report, proc.returncode, timed_out, "".join(lines)[-OUTPUT_TAIL:],
                         time.monotonic() - started)


_warm: Optional[WarmEvaluator] = None


def _warm_spawn(eval_command: list[str], command: list[str], cwd: str, env: dict[str, str],
                report_fd: int, cuda: bool) -> Optional[WarmChild]:
    """The job's `pkb eval` forked from the warm evaluator (worker/warm.py), where this worker
    runs the evaluator it ships (not a PKB_EVAL_COMMAND of its own) and PKB_WARM_EVAL is not 0;
    None: start a fresh process instead."""
    global _warm
    if os.environ.get("PKB_WARM_EVAL", "1") == "0" or eval_command != default_eval_command():
        return None
    if _warm is None:
        _warm = WarmEvaluator(env, preexec=libc.dies_with(os.getpid()))
    child = _warm.spawn(command[len(eval_command):], cwd, env, {report_fd: report_fd}, cuda=cuda)
    if child is None:
        log.warning("the warm evaluator is not available (%s): this job starts a fresh pkb eval",
                    _warm.unavailable)
    return child


def _read_all(fd: int, chunks: list[bytes], limit: int = 64 * 2**20) -> None:
    """Everything written to ``fd`` until every writer closes it (at most ``limit`` bytes)."""
    size = 0
    try:
        while chunk := os.read(fd, 1 << 16):
            size += len(chunk)
            if size > limit:
                chunks.clear()
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
