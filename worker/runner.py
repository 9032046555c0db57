"""Runs the evaluator CLI on one job in its own process session, under a hard time limit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import progress
from .config import SAFE_GPU_ENV
from .progress import Progress

OUTPUT_TAIL = 20_000


@dataclass(frozen=True)
class RunResult:
    report: dict[str, Any] | None
    exit_code: int | None
    timed_out: bool
    output_tail: str
    seconds: float


def command_for(job: dict[str, Any], eval_command: list[str], solution: Path, out: Path,
                extra: tuple[str, ...] = ()) -> list[str]:
    cmd = [*eval_command, "eval", "--problem", str(job["problem"]), "--solution", str(solution),
           "--world-size", str(int(job["world_size"])), "--device", str(job["device"]),
           "--size", str(job["size"]), "--trials", str(int(job.get("trials") or 5)),
           "--json", str(out), "--progress"]
    if job.get("dtype"):
        cmd += ["--dtype", str(job["dtype"])]
    if job.get("hardware_profile"):
        cmd += ["--hardware", str(job["hardware_profile"])]
    return cmd + list(extra)


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


def _pump(stream: Any, sink: list[str], tracker: progress.Tracker,
          on_progress: Callable[[Progress], None]) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace")
        event = progress.parse(line)
        if event is None:
            sink.append(line)  # progress lines stay out of the tail a failure shows
        elif (step := tracker.feed(event)) is not None:
            on_progress(step)


def run(job: dict[str, Any], eval_command: list[str], timeout_s: float,
        on_progress: Callable[[Progress], None] = lambda _: None, extra: tuple[str, ...] = ()) -> RunResult:
    """Runs `pkb eval --progress`; ``on_progress`` gets each step as rank 0 of a side reports."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"pkb-{job['submission_id']}-") as tmp:
        solution, out = Path(tmp) / "solution.py", Path(tmp) / "report.json"
        solution.write_text(job["source"], encoding="utf-8")
        env = {**os.environ, **SAFE_GPU_ENV, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(command_for(job, eval_command, solution, out, extra), cwd=tmp, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        lines: list[str] = []
        tracker = progress.Tracker(int(job.get("trials") or 5))
        pump = threading.Thread(target=_pump, args=(proc.stdout, lines, tracker, on_progress),
                                daemon=True)
        pump.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill_session(proc)  # also reaps ranks the CLI left behind
        pump.join(timeout=5)
        report = None
        if out.exists() and not timed_out:
            try:
                report = json.loads(out.read_text())
            except ValueError:
                report = None
        return RunResult(report, proc.returncode, timed_out, "".join(lines)[-OUTPUT_TAIL:],
                         time.monotonic() - started)
