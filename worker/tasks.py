"""The evaluation task. Takes a self-contained job (see portal/submissions/services.py
``task_payload``) and answers over HTTP; the broker carries no results."""

from __future__ import annotations

import logging
import socket
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_init

from . import callback, confinement, progress, runner
from .app import app
from .config import WorkerConfig

log = logging.getLogger(__name__)


def _url(job: dict[str, Any], config: WorkerConfig, what: str) -> str:
    base = job["callback_url"]
    if config.portal_url:
        base = config.portal_url.rstrip("/") + "/api/v1/worker/submissions/" \
            + f"{job['submission_id']}/"
    return f"{base}{what}/"


def _worker_name(config: WorkerConfig) -> str:
    return config.name or socket.gethostname()


def evaluate_job(job: dict[str, Any], config: WorkerConfig | None = None) -> str:
    config = config or WorkerConfig()
    token, name = job["token"], _worker_name(config)

    def status(value: str, step: str = "") -> None:
        try:
            callback.post(_url(job, config, "status"), token,
                          {"status": value, "step": step, "worker": name}, retries=1)
        except Exception as exc:  # status is advisory; the report is what counts
            log.warning("status %s for %s not delivered: %s", value, job["submission_id"], exc)

    try:
        flags = tuple(confinement.sandbox_flags(config))
    except confinement.SandboxUnavailable as exc:
        return _post(job, config, {"error": f"The worker refused the job: {exc}.", "worker": name}, "refused")
    status("compiling", "starting the evaluator")
    limit = min(float(job.get("timeout_s") or config.max_eval_s), float(config.max_eval_s))
    sender = progress.LatestSender(lambda p: status(p.status, p.step))
    try:
        result = runner.run(job, config.eval_command, limit, on_progress=sender.put, extra=flags)
    finally:
        sender.close()
    if result.report is not None:
        payload: dict[str, Any] = {"report": result.report, "worker": name}
        outcome = "report"
    elif result.timed_out:
        payload = {"error": f"The evaluation ran past the worker's limit of {limit:.0f} s and "
                            "was killed (all ranks).", "output": result.output_tail, "worker": name}
        outcome = "timeout"
    else:
        payload = {"error": f"The evaluator exited with code {result.exit_code} without writing "
                            "a report.", "output": result.output_tail, "worker": name}
        outcome = "no-report"
    return _post(job, config, payload, outcome)


def _post(job: dict[str, Any], config: WorkerConfig, payload: dict[str, Any], outcome: str) -> str:
    try:
        callback.post(_url(job, config, "report"), job["token"], payload, retries=config.post_retries)
    except callback.CallbackRejected as exc:
        log.warning("portal refused the result of %s: %s", job["submission_id"], exc)
        return "rejected"
    return outcome


@worker_init.connect
def refuse_to_start_unconfined(**_: Any) -> None:
    """A worker that cannot confine candidates does not take jobs unless its operator said so."""
    confinement.sandbox_flags(WorkerConfig())


@app.task(name="pkb.evaluate", bind=True, acks_late=True, reject_on_worker_lost=True,
          ignore_result=True)
def evaluate(self: Any, job: dict[str, Any]) -> str:
    try:
        return evaluate_job(job)
    except SoftTimeLimitExceeded:
        return "soft-time-limit"
