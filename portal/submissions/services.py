"""Creating and dispatching submissions: the one workflow the pages, the API and seeding share."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from contract.callbacks import submission_url
from contract.job import TASK_NAME, EvalJob
from portal.catalog.models import Hardware, Problem, ProblemVersion

from .lifecycle import issue_secret
from .models import AIModel, Status, Submission
from .validation import SubmissionError, check_model_name, check_python, decode_source

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    version: ProblemVersion
    hardware: Hardware
    world_size: int


def resolve_target(problem_slug: str, hardware_slug: str) -> Target:
    problem = Problem.objects.active().filter(slug=problem_slug).first()
    if problem is None:
        raise SubmissionError("unknown_problem", f"No problem {problem_slug!r}.", field="problem")
    version = problem.current_version()
    if version is None:
        raise SubmissionError("unknown_problem", f"{problem_slug} has no loaded version.",
                              field="problem")
    hardware = Hardware.objects.active().filter(slug=hardware_slug).first()
    if hardware is None:
        raise SubmissionError("unknown_hardware", f"No hardware {hardware_slug!r}.",
                              field="hardware")
    world_size = hardware.ranked_world_size(problem.world_sizes)
    if world_size is None:
        raise SubmissionError("unsupported_world_size", f"{problem_slug} runs at world sizes "
                              f"{problem.world_sizes}; {hardware.slug} has {hardware.world_size}.",
                              field="hardware")
    return Target(version, hardware, world_size)


def check_daily_cap(user: Any) -> None:
    if user.is_staff:
        return
    cap = settings.PKB_DAILY_SUBMISSION_CAP
    since = timezone.now() - timedelta(days=1)
    used = Submission.objects.filter(user=user, created_at__gte=since,
                                     origin__in=("upload", "api")).count()
    if used >= cap:
        raise SubmissionError("daily_cap", f"Daily cap reached: {used} of {cap} submissions in "
                              "the last 24 hours. Try again later.", status=429)


def get_model(name: str, provider: str = "") -> AIModel:
    model, created = AIModel.objects.get_or_create(
        name=name, defaults={"provider": provider[:100], "kind": AIModel.kind_for(name)})
    if not created and provider and not model.provider:
        model.provider = provider[:100]
        model.save(update_fields=["provider"])
    return model


def next_attempt(model: AIModel, version: ProblemVersion, hardware: Hardware) -> int:
    found = Submission.objects.filter(model=model, problem_version=version, hardware=hardware)
    return (found.aggregate(n=Max("attempt"))["n"] or 0) + 1


def submit(*, user: Any, problem: str, hardware: str, backend: str, model: str,
           provider: str = "", source: bytes, origin: str = "upload") -> Submission:
    """Validate everything first, store in one transaction, dispatch after commit."""
    text = decode_source(source, settings.PKB_MAX_SOURCE_BYTES)
    check_python(text)
    name = check_model_name(model)
    if backend not in {b for b, _ in Submission._meta.get_field("backend").choices}:
        raise SubmissionError("unknown_backend", f"Unknown backend {backend!r}.", field="backend")
    target = resolve_target(problem, hardware)
    if origin in ("upload", "api"):
        check_daily_cap(user)
    return create(user=user, target=target, backend=backend, model=get_model(name, provider),
                  text=text, origin=origin)


def create(*, user: Any, target: Target, backend: str, model: AIModel, text: str,
           origin: str) -> Submission:
    with transaction.atomic():
        submission = Submission(
            user=user, model=model, problem_version=target.version, hardware=target.hardware,
            backend=backend, world_size=target.world_size, size=target.hardware.size,
            attempt=next_attempt(model, target.version, target.hardware), source=text,
            source_sha256=hashlib.sha256(text.encode()).hexdigest(), origin=origin)
        token = issue_secret(submission)
        submission.save()
        transaction.on_commit(lambda: dispatch(submission.pk, token))
    return submission


def task_payload(submission: Submission, token: str) -> dict[str, Any]:
    """The whole job (contract.job): a worker needs nothing from the database."""
    hardware = submission.hardware
    return EvalJob(
        submission_id=submission.pk, problem=submission.problem.slug,
        problem_version=submission.problem_version.version, source=submission.source,
        world_size=submission.world_size, device=hardware.device, size=submission.size,
        dtype=submission.dtype or None, trials=settings.PKB_EVAL_TRIALS,
        hardware_profile=None if hardware.builtin else hardware.slug,
        timeout_s=float(settings.PKB_EVAL_TIMEOUT_S),
        callback_url=submission_url(settings.PKB_CALLBACK_BASE_URL, submission.pk), token=token,
    ).to_payload()


def queue_for(submission: Submission) -> str:
    """Baseline runs go to a side queue that the same workers drain between user jobs."""
    queue = submission.hardware.queue
    return f"{queue}.baseline" if submission.origin == "baseline" else queue


def dispatch(submission_id: int, token: str) -> None:
    from portal.celery import app

    submission = Submission.objects.select_related(
        "hardware", "problem_version__problem").get(pk=submission_id)
    try:
        result = app.send_task(TASK_NAME, kwargs={"job": task_payload(submission, token)},
                               queue=queue_for(submission))
    except Exception as exc:  # broker down: say so rather than leave it queued forever
        log.exception("could not enqueue submission %s", submission_id)
        Submission.objects.filter(pk=submission_id, status=Status.QUEUED).update(
            status=Status.FAILED, finished_at=timezone.now(),
            status_reason=f"Could not reach the job queue: {type(exc).__name__}: {exc}")
        return
    Submission.objects.filter(pk=submission_id).update(task_id=result.id or "")
