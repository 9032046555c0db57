"""Worker settings, from the environment only."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    return int(raw) if raw.strip() else default


# The directory this worker's own packages were imported from: a checkout on a GPU host (nothing
# installed there but torch), site-packages where the project is installed. The evaluator the
# worker starts is imported from here too, so both are always the same code.
CODE_ROOT = Path(__file__).resolve().parents[1]


def default_eval_command() -> list[str]:
    # -P: the job's temporary directory (the subprocess's cwd, holding solution.py) stays off
    # sys.path; the evaluator is found through PYTHONPATH (runner.evaluator_env).
    return [sys.executable, "-P", "-m", "evaluator.cli"]


def _eval_command() -> list[str]:
    return os.environ.get("PKB_EVAL_COMMAND", "").split() or default_eval_command()


@dataclass(frozen=True)
class WorkerConfig:
    broker_url: str = field(default_factory=lambda: os.environ.get(
        "PKB_BROKER_URL", "redis://127.0.0.1:6379/0"))
    broker_dir: str = field(default_factory=lambda: os.environ.get(
        "PKB_BROKER_DIR", str(Path.cwd() / "var" / "broker")))
    # Overrides the portal address in jobs when the worker reaches it by another name.
    portal_url: str = field(default_factory=lambda: os.environ.get("PKB_PORTAL_URL", ""))
    max_eval_s: int = field(default_factory=lambda: _int("PKB_WORKER_MAX_EVAL_S", 1800))
    # A requested message-size sweep runs after the evaluation, in the same task.
    max_sweep_s: int = field(default_factory=lambda: _int("PKB_WORKER_MAX_SWEEP_S", 3600))
    task_grace_s: int = field(default_factory=lambda: _int("PKB_WORKER_TASK_GRACE_S", 120))
    # A result the portal cannot take yet is kept on disk and re-posted with backoff (capped at
    # retry_max_s) for up to delivery_max_s inside the task; a restarted worker posts what is left.
    spool_dir: str = field(default_factory=lambda: os.environ.get(
        "PKB_WORKER_SPOOL_DIR", str(Path.cwd() / "var" / "worker-spool")))
    retry_max_s: float = field(default_factory=lambda: float(_int("PKB_WORKER_RETRY_MAX_S", 60)))
    delivery_max_s: int = field(default_factory=lambda: _int("PKB_WORKER_DELIVERY_MAX_S", 6 * 3600))
    # How long a job taken by a worker that went silent waits before Redis hands it to another:
    # longer than any evaluation (twice the task limit by default), or it would run twice.
    visibility_timeout_s: int = field(default_factory=lambda: _int("PKB_WORKER_VISIBILITY_TIMEOUT_S", 0))
    eval_command: list[str] = field(default_factory=_eval_command)
    name: str = field(default_factory=lambda: os.environ.get("PKB_WORKER_NAME", ""))
    # An operator's explicit choice to evaluate where the sandbox cannot work (reports say so).
    allow_unsandboxed: bool = field(default_factory=lambda: os.environ.get(
        "PKB_WORKER_ALLOW_UNSANDBOXED", "") == "1")

    @property
    def task_time_limit(self) -> int:
        return self.max_eval_s + self.max_sweep_s + self.task_grace_s
