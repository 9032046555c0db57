"""The production stack's processes, as command lines: the web server, the evaluation workers
and the reaper. ``pkb_up --production`` starts them on one machine; the fault tests start the
same ones against their own database and broker, so what is tested is what runs.

Each spec is argv plus the environment it needs; ``supervise`` watches started children.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def environ(self) -> dict[str, str]:
        return {**os.environ, **self.env}


def gunicorn(bind: str, *, workers: int = 3, threads: int = 8, settings: str,
             env: dict[str, str] | None = None) -> ProcessSpec:
    """gthread workers: threads wait on the database while another request runs Python, which
    is what a 2-core host needs for 50 concurrent clients. Static files come from whitenoise."""
    return ProcessSpec("web", [
        sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind", bind,
        "--workers", str(workers), "--worker-class", "gthread", "--threads", str(threads),
        "--timeout", "60", "--graceful-timeout", "20", "--max-requests", "5000",
        "--max-requests-jitter", "500", "--access-logfile", "-", "--error-logfile", "-",
        "--forwarded-allow-ips", "127.0.0.1",
    ], {"DJANGO_SETTINGS_MODULE": settings, **(env or {})})


def evaluation_worker(queue: str, *, broker_url: str, portal_url: str, name: str,
                      env: dict[str, str] | None = None) -> ProcessSpec:
    """One job at a time per worker (an evaluation owns the host's GPUs or cores); the worker
    does not import Django and needs no database credentials."""
    base = {"PKB_BROKER_URL": broker_url, "PKB_PORTAL_URL": portal_url, "PKB_WORKER_NAME": name}
    return ProcessSpec(f"worker {name}", [
        sys.executable, "-m", "celery", "-A", "worker", "worker", "-Q", f"{queue},{queue}.baseline",
        "--concurrency", "1", "--prefetch-multiplier", "1", "-n", f"{name}@%h", "--loglevel", "INFO",
        "--without-gossip", "--without-mingle",
    ], {**base, **(env or {})})


def reaper(*, broker_url: str, settings: str, schedule_file: Path,
           env: dict[str, str] | None = None) -> ProcessSpec:
    """The portal's own Celery worker on ``pkb.portal`` with beat embedded (-B): one process that
    fails stuck submissions and re-sends lost dispatches every PKB_REAP_EVERY_S."""
    return ProcessSpec("reaper", [
        sys.executable, "-m", "celery", "-A", "portal", "worker", "-B", "-Q", "pkb.portal",
        "--concurrency", "1", "-n", "portal-reaper@%h", "--loglevel", "INFO",
        "--schedule", str(schedule_file), "--without-gossip", "--without-mingle",
    ], {"DJANGO_SETTINGS_MODULE": settings, "PKB_BROKER_URL": broker_url, **(env or {})})


def supervise(children: list[subprocess.Popen[bytes]], names: list[str],
              say: Callable[[str], None], grace_s: float = 20) -> None:
    """Until Ctrl-C, SIGTERM or one child exits; then every child is stopped (TERM, then KILL
    after ``grace_s``) and the process exits."""

    def stop(*_: Any) -> None:
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                child.kill()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        while all(child.poll() is None for child in children):
            time.sleep(1)
        say(f"{next(n for n, c in zip(names, children) if c.poll() is not None)} exited; "
            "stopping the others")
    except KeyboardInterrupt:
        pass
    stop()
