"""A submission's life, owned here: the states it may move between, the timestamps of each move,
its worker secret (spent by the first result), and the reaper that fails a job whose worker went
silent. Workers' messages and the reaper go through these functions; pages only read.

    queued ──► compiling ──► running ──► finished
       │           │            │
       └───────────┴────────────┴──────► failed      (a worker's error, or the reaper)

A requested message-size sweep (``sweep_status``) waits for the evaluation; a passing one is
swept by the same worker (running ──► finished | failed), anything else leaves it skipped. The
worker secret outlives the report only while a sweep is running.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any, Mapping

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from contract.job import sweep_follows
from portal.catalog.models import ProblemVersion
from portal.lib import reports
from portal.lib.reports import summarize
from portal.lib.sweeps import sweep_error

from .models import PENDING, Status, Submission, SweepStatus

log = logging.getLogger(__name__)
WORKER_STATUSES = {Status.COMPILING, Status.RUNNING}
# Where each state may go. A state may also repeat (a new progress step); a late "compiling"
# after "running" is accepted and changes nothing (messages can overtake each other).
TRANSITIONS: dict[str, frozenset[str]] = {
    Status.QUEUED: frozenset({Status.COMPILING, Status.RUNNING, Status.FINISHED, Status.FAILED}),
    Status.COMPILING: frozenset({Status.RUNNING, Status.FINISHED, Status.FAILED}),
    Status.RUNNING: frozenset({Status.FINISHED, Status.FAILED}),
    Status.FINISHED: frozenset(),
    Status.FAILED: frozenset(),
}


class TransitionError(Exception):
    """A worker message that does not fit the submission's state (late, duplicate, unknown)."""


def _check_move(sub: Submission, to: str) -> None:
    if to == sub.status and to in PENDING:
        return  # a pending state repeats with each progress step
    if to not in TRANSITIONS[sub.status]:
        raise TransitionError(f"submission {sub.pk} is already {sub.status}")


def issue_secret(sub: Submission) -> str:
    """A fresh worker secret for ``sub`` (its hash is stored, the secret goes with the job)."""
    return sub.new_token()


def record_status(submission_id: int, status: str, worker: str = "", step: str = "") -> Submission:
    if status not in WORKER_STATUSES:
        raise TransitionError(f"workers may report {sorted(WORKER_STATUSES)}, not {status!r}")
    with transaction.atomic():
        sub = Submission.objects.select_for_update().get(pk=submission_id)
        if sub.status not in PENDING:
            raise TransitionError(f"submission {sub.pk} is already {sub.status}")
        now = timezone.now()
        if not (status == Status.COMPILING and sub.status == Status.RUNNING):
            _check_move(sub, status)
        if not (status == Status.COMPILING and sub.status == Status.RUNNING):  # never back
            sub.status = status
        sub.progress = step[:200]
        sub.started_at = sub.started_at or now
        if status == Status.COMPILING:
            sub.compiling_at = sub.compiling_at or now
        else:
            sub.running_at = sub.running_at or now
        sub.worker = worker[:200] or sub.worker
        sub.save()
    return sub


def _version_that_ran(sub: Submission, report: Mapping[str, Any]) -> ProblemVersion:
    """Results stay tied to the version that ran: usually the submitted one."""
    ran = reports.text(report, "problem", "version")
    if not ran or ran == sub.problem_version.version:
        return sub.problem_version
    version, _ = ProblemVersion.objects.get_or_create(
        problem=sub.problem_version.problem, version=ran,
        defaults={"source_recorded": False, "title": sub.problem_version.title})
    return version


def apply_report(sub: Submission, report: Mapping[str, Any]) -> None:
    summary = summarize(report)
    sub.report = dict(report)
    sub.verdict = summary.verdict
    sub.failure_class = summary.failure_class if summary.verdict == "fail" else ""
    sub.speedup = summary.speedup
    sub.speedup_low = summary.speedup_low
    sub.speedup_high = summary.speedup_high
    sub.candidate_ms = summary.candidate_ms
    sub.reference_ms = summary.reference_ms
    sub.roofline_fraction = summary.roofline_fraction
    # blank meant "the problem's default" until it ran; the report says which dtype that was
    sub.dtype = sub.dtype or str(reports.mapping(report, "setting").get("dtype") or "")[:20]
    version = _version_that_ran(sub, report)
    if version.pk != sub.problem_version_id:
        sub.status_reason = (f"The worker ran problem version {version.version}, not "
                             f"{sub.problem_version.version}; the result is filed under it.")
        sub.problem_version = version


def record_report(submission_id: int, report: Mapping[str, Any], worker: str = "") -> Submission:
    with transaction.atomic():
        sub = Submission.objects.select_for_update().select_related(
            "problem_version__problem").get(pk=submission_id)
        _check_move(sub, Status.FINISHED)
        apply_report(sub, report)
        sub.status = Status.FINISHED
        sub.finished_at = timezone.now()
        sub.worker = worker[:200] or sub.worker
        sub.progress = ""
        if sub.sweep_status == SweepStatus.WAITING and sweep_follows(report):
            sub.sweep_status = SweepStatus.RUNNING  # the worker sweeps next: the secret stays
        else:
            _skip_sweep(sub, "The evaluation did not pass, so no sweep was run.")
            sub.token_hash = ""  # one report per submission: the secret is spent
        sub.save()
    return sub


def _skip_sweep(sub: Submission, reason: str) -> None:
    if sub.sweep_status == SweepStatus.WAITING:
        sub.sweep_status = SweepStatus.SKIPPED
        sub.sweep_reason = reason


def _running_sweep(submission_id: int) -> Submission:
    sub = Submission.objects.select_for_update().select_related("problem_version__problem").get(pk=submission_id)
    if sub.sweep_status != SweepStatus.RUNNING:
        state = sub.get_sweep_status_display() if sub.sweep_status else "not requested"
        raise TransitionError(f"submission {sub.pk} has no sweep running (its sweep is {state})")
    return sub


class SweepRejected(Exception):
    """A sweep report that cannot be this submission's: says why."""


def record_sweep(submission_id: int, sweep: Mapping[str, Any], worker: str = "") -> Submission:
    with transaction.atomic():
        sub = _running_sweep(submission_id)
        problem = sweep_error(sweep, problem=sub.problem_version.problem.slug, world_size=sub.world_size,
                              source_sha256=sub.source_sha256)
        if problem is not None:
            raise SweepRejected(f"the sweep {problem}")
        sub.sweep = dict(sweep)
        sub.sweep_status = SweepStatus.FINISHED
        sub.sweep_reason = ""
        sub.sweep_finished_at = timezone.now()
        sub.worker = worker[:200] or sub.worker
        sub.token_hash = ""  # the sweep was the last message: the secret is spent
        sub.save()
    return sub


def record_sweep_failure(submission_id: int, reason: str, worker: str = "") -> Submission:
    with transaction.atomic():
        sub = _running_sweep(submission_id)
        sub.sweep_status = SweepStatus.FAILED
        sub.sweep_reason = reason[:4000]
        sub.sweep_finished_at = timezone.now()
        sub.worker = worker[:200] or sub.worker
        sub.token_hash = ""
        sub.save()
    return sub


def record_failure(submission_id: int, reason: str, worker: str = "") -> Submission:
    with transaction.atomic():
        sub = Submission.objects.select_for_update().get(pk=submission_id)
        _check_move(sub, Status.FAILED)
        sub.status = Status.FAILED
        sub.status_reason = reason[:4000]
        _skip_sweep(sub, "The evaluation produced no report, so no sweep was run.")
        sub.finished_at = timezone.now()
        sub.worker = worker[:200] or sub.worker
        sub.token_hash = ""
        sub.progress = ""
        sub.save()
    return sub


def stuck_reason(sub: Submission) -> str:
    if sub.status == Status.QUEUED:
        return (f"No worker for {sub.hardware.slug} (queue {sub.hardware.queue}) picked this up "
                f"within {settings.PKB_QUEUE_TIMEOUT_S} s.")
    return (f"The worker{' ' + sub.worker if sub.worker else ''} stopped reporting: no result "
            f"within {settings.PKB_EVAL_TIMEOUT_S + settings.PKB_RUN_GRACE_S} s of the start "
            f"(evaluation limit {settings.PKB_EVAL_TIMEOUT_S} s plus {settings.PKB_RUN_GRACE_S} s).")


def is_stuck(sub: Submission, now: datetime | None = None) -> bool:
    deadline = sub.deadline(settings.PKB_EVAL_TIMEOUT_S, settings.PKB_RUN_GRACE_S,
                            settings.PKB_QUEUE_TIMEOUT_S)
    return deadline is not None and (now or timezone.now()) > deadline


def overdue_reason(sub: Submission) -> str:
    """For pages: why a pending job will be failed by the reaper, or "" (reads, never writes)."""
    return f"Overdue: {stuck_reason(sub)} The reaper will mark it failed." if is_stuck(sub) else ""


def reap_one(sub: Submission, now: datetime | None = None) -> bool:
    if not is_stuck(sub, now):
        return False
    try:
        record_failure(sub.pk, stuck_reason(sub))
    except TransitionError:
        return False
    return True


def sweep_is_stuck(sub: Submission, now: datetime | None = None) -> bool:
    if sub.sweep_status != SweepStatus.RUNNING or sub.finished_at is None:
        return False
    limit = settings.PKB_SWEEP_TIMEOUT_S + settings.PKB_RUN_GRACE_S
    return (now or timezone.now()) > sub.finished_at + timedelta(seconds=limit)


def reap_sweep(sub: Submission, now: datetime | None = None) -> bool:
    if not sweep_is_stuck(sub, now):
        return False
    try:
        record_sweep_failure(sub.pk, f"The worker{' ' + sub.worker if sub.worker else ''} sent no sweep within "
                                     f"{settings.PKB_SWEEP_TIMEOUT_S + settings.PKB_RUN_GRACE_S} s of the "
                                     f"evaluation (sweep limit {settings.PKB_SWEEP_TIMEOUT_S} s plus "
                                     f"{settings.PKB_RUN_GRACE_S} s).")
    except TransitionError:
        return False
    return True


def reap_stuck(now: datetime | None = None) -> int:
    """Fail every submission, and every sweep, past its deadline, with the reason; returns how many."""
    pending = Submission.objects.pending().select_related("hardware")
    sweeping = Submission.objects.filter(sweep_status=SweepStatus.RUNNING)
    return sum(reap_one(sub, now) for sub in pending) + sum(reap_sweep(sub, now) for sub in sweeping)
