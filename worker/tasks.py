"""The evaluation task. Takes a self-contained job (contract.job.EvalJob, sent by the portal's
``task_payload``) and answers over HTTP; the broker carries no results."""

from __future__ import annotations

import logging
import socket
import sys
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_init, worker_ready

from contract.callbacks import report_url, status_url, submission_url, sweep_url
from contract.job import TASK_NAME, EvalJob, JobError, sweep_follows

from . import callback, confinement, delivery, progress, runner
from .app import app
from .config import WorkerConfig

log = logging.getLogger(__name__)


def _endpoint(job: EvalJob, config: WorkerConfig) -> str:
    """The submission's endpoint, at the portal address this worker was told to use, if any."""
    return submission_url(config.portal_url, job.submission_id) if config.portal_url else job.callback_url


def _worker_name(config: WorkerConfig) -> str:
    return config.name or socket.gethostname()


def evaluate_job(payload: dict[str, Any], config: WorkerConfig | None = None) -> str:
    config = config or WorkerConfig()
    try:
        job = EvalJob.from_payload(payload)
    except JobError as exc:
        # Without a valid job there is no trustworthy address to answer: log it, ack it.
        log.error("not a job, dropped: %s", exc)
        return "bad-job"
    token, name = job.token, _worker_name(config)

    def status(value: str, step: str = "") -> None:
        try:
            callback.post(status_url(_endpoint(job, config)), token,
                          {"status": value, "step": step, "worker": name}, retries=1)
        except Exception as exc:  # status is advisory; the report is what counts
            log.warning("status %s for %s not delivered: %s", value, job.submission_id, exc)

    try:
        flags = tuple(confinement.sandbox_flags(config))
    except confinement.SandboxUnavailable as exc:
        return _post(job, config, {"error": f"The worker refused the job: {exc}.", "worker": name}, "refused")
    status(progress.initial_status(job.device), "starting the evaluator")
    limit = min(job.timeout_s, float(config.max_eval_s))
    sender = progress.LatestSender(lambda p: status(p.status, p.step))
    try:
        result = runner.run(job, config.eval_command, limit, on_progress=sender.put, extra=flags)
    finally:
        sender.close()
    payload, outcome = _result_payload(result, "report", "evaluation", "The evaluator", limit, name)
    outcome = _post(job, config, payload, outcome)
    if job.sweep and outcome == "report" and result.report is not None and sweep_follows(result.report):
        return f"{outcome}+{run_sweep(job, config, flags, name)}"
    return outcome


def run_sweep(job: EvalJob, config: WorkerConfig, flags: tuple[str, ...], name: str) -> str:
    """The requested message-size sweep, after a passing evaluation was posted; its report (or
    why there is none) goes to the submission's sweep endpoint."""
    limit = min(job.sweep_timeout_s, float(config.max_sweep_s))
    result = runner.run(job, config.eval_command, limit, extra=flags, sweep=True)
    payload, outcome = _result_payload(result, "sweep", "sweep", "`pkb sweep`", limit, name)
    return _post(job, config, payload, outcome, url=sweep_url(_endpoint(job, config)))


def _result_payload(result: runner.RunResult, key: str, what: str, program: str, limit: float,
                    name: str) -> tuple[dict[str, Any], str]:
    """What to post about a run (its report under ``key``, or why there is none) and the outcome."""
    prefix = "" if key == "report" else f"{key}-"
    if result.report is not None:
        return {key: result.report, "worker": name}, key
    if result.timed_out:
        return ({"error": f"The {what} ran past the worker's limit of {limit:.0f} s and was killed (all ranks).",
                 "output": result.output_tail, "worker": name}, f"{prefix}timeout")
    return ({"error": f"{program} exited with code {result.exit_code} without writing "
                      "a report.", "output": result.output_tail, "worker": name}, f"{prefix}no-report")


def _post(job: EvalJob, config: WorkerConfig, payload: dict[str, Any], outcome: str,
          url: str | None = None) -> str:
    """The result (or the sweep, at ``url``) reaches the portal or stays on disk
    (worker.delivery): never dropped because the portal was down when the evaluation ended."""
    answer = delivery.deliver(job.submission_id, url or report_url(_endpoint(job, config)), job.token,
                              payload, config)
    if answer == "rejected":
        log.warning("portal refused the result of %s", job.submission_id)
    return outcome if answer in ("accepted", "duplicate") else answer


@worker_init.connect
def refuse_to_start_unconfined(**_: Any) -> None:
    """A worker that cannot confine candidates does not start unless its operator said so.

    Celery logs and drops an exception a signal handler raises (the worker would start and
    refuse each job), so the refusal leaves the process with SystemExit, which it lets through.
    """
    try:
        confinement.sandbox_flags(WorkerConfig())
    except confinement.SandboxUnavailable as exc:
        log.critical("%s", exc)
        print(f"pkb worker: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


@worker_ready.connect
def post_results_left_behind(**_: Any) -> None:
    """Results a previous run of this worker could not deliver go out first."""
    delivery.flush_in_background(WorkerConfig())


@app.task(name=TASK_NAME, bind=True, acks_late=True, reject_on_worker_lost=True,
          ignore_result=True)
def evaluate(self: Any, job: dict[str, Any]) -> str:
    try:
        return evaluate_job(job)
    except SoftTimeLimitExceeded:
        return "soft-time-limit"
