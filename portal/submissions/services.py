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
from .models import AIModel, Status, Submission, SweepStatus
from .validation import (SubmissionError, check_file_name, check_model_name, check_provider,
                         check_python, decode_source)
from .workers import liveness

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    version: ProblemVersion
    hardware: Hardware
    world_size: int


def submittable_problem(problem_slug: str) -> tuple[Problem, ProblemVersion]:
    """The active problem of that slug and its current version, or the error that says why not
    (checked before hardware, so a misspelt problem is named as such even where no hardware is)."""
    problem = Problem.objects.active().filter(slug=problem_slug).first()
    if problem is None and Problem.objects.filter(slug=problem_slug, retired=True).exists():
        raise SubmissionError("retired_problem", f"{problem_slug} is retired and takes no more "
                              "submissions; GET /api/v1/problems/ lists the active ones.",
                              field="problem")
    if problem is None:
        raise SubmissionError("unknown_problem", f"No problem {str(problem_slug)[:100]!r}; "
                              "GET /api/v1/problems/ lists them (use the slug).", field="problem")
    version = problem.current_version()
    if version is None:
        raise SubmissionError("unknown_problem", f"{problem_slug} has no loaded version.",
                              field="problem")
    return problem, version


def resolve_target(problem_slug: str, hardware_slug: str) -> Target:
    problem, version = submittable_problem(problem_slug)
    hardware = Hardware.objects.active().filter(slug=hardware_slug).first()
    if hardware is None:
        raise SubmissionError("unknown_hardware", f"No hardware {str(hardware_slug)[:100]!r}; "
                              "GET /api/v1/hardware/ lists the profiles (use the id).",
                              field="hardware")
    world_size = hardware.ranked_world_size(problem.world_sizes)
    if world_size is None:
        raise SubmissionError("unsupported_world_size", f"{problem_slug} runs at world sizes "
                              f"{problem.world_sizes}; {hardware.slug} has {hardware.world_size}: "
                              "choose hardware with one of those sizes.",
                              field="hardware")
    return Target(version, hardware, world_size)


def check_daily_cap(user: Any) -> None:
    if user.is_staff:
        return
    cap = settings.PKB_DAILY_SUBMISSION_CAP
    since = timezone.now() - timedelta(days=1)
    # A run's samples have limits of their own (portal/runs): they do not use up this cap.
    used = Submission.objects.filter(user=user, created_at__gte=since, origin__in=("upload", "api"),
                                     run_sample__isnull=True).count()
    if used >= cap:
        raise SubmissionError("daily_cap", f"Daily cap reached: {used} of {cap} submissions in "
                              "the last 24 hours. Try again later.", status=429)


def check_live_worker(hardware: Hardware) -> None:
    """Refuse what no worker would take: it would sit queued until the reaper failed it.

    Refused rather than accepted with a warning: no estimate of when a worker appears is
    possible, and a bot that gets a 503 with Retry-After retries or picks other hardware.
    An unknown answer (the broker did not reply) is not a refusal; dispatch reports that itself.
    """
    if not settings.PKB_REQUIRE_LIVE_WORKER or liveness().serves(hardware.queue) is not False:
        return
    live = [hw.slug for hw in live_hardware()]
    where = (f"Hardware with a live worker now: {', '.join(live)}." if live
             else "No hardware has a live worker now.")
    raise SubmissionError("no_worker", f"No worker serves {hardware.slug} (queue {hardware.queue}) "
                          f"right now, so nothing would evaluate this upload. {where} Try again "
                          "later or choose other hardware.", status=503, field="hardware",
                          retry_after=60)


def live_hardware() -> list[Hardware]:
    """Active hardware that a live worker serves now, most finished results first."""
    state = liveness()
    return [hw for hw in _by_results() if state.serves(hw.queue)]


def preferred_hardware() -> Hardware | None:
    """The default where a visitor or bot names none: hardware a worker serves, else the busiest."""
    live = live_hardware()
    return live[0] if live else next(iter(_by_results()), None)


def obvious_hardware(problem_slug: str) -> Hardware | None:
    """The one choice when ``hardware`` is omitted: the only hardware the problem runs on that
    a worker serves, or the only hardware the problem runs on; otherwise none is obvious."""
    problem = Problem.objects.active().filter(slug=problem_slug).first()
    if problem is None:
        return None
    fits = [hw for hw in _by_results() if hw.ranked_world_size(problem.world_sizes) is not None]
    state = liveness()
    served = [hw for hw in fits if state.serves(hw.queue)]
    if len(served) == 1:
        return served[0]
    return fits[0] if len(fits) == 1 else None


def _by_results() -> list[Hardware]:
    from django.db.models import Count, Q

    return list(Hardware.objects.active()
                .annotate(n=Count("submissions", filter=Q(submissions__status=Status.FINISHED)))
                .order_by("-n", "builtin", "slug"))


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


def check_sweep(target: Target) -> None:
    if not (target.version.details or {}).get("sweep"):
        raise SubmissionError("no_sweep_axis", f"{target.version.problem.slug} declares no message-size "
                              "sweep axis, so it cannot be swept; submit without a sweep, or pick a "
                              "problem that has one (the plain collectives, the tensor-parallel GEMMs).",
                              field="sweep")


def submit(*, user: Any, problem: str, hardware: str, backend: str, model: str,
           provider: str = "", source: bytes, origin: str = "upload", sweep: bool = False,
           file_name: str | None = None) -> Submission:
    """Validate everything first, store in one transaction, dispatch after commit. ``sweep``
    asks for a message-size sweep after the evaluation (docs/sweeps.md)."""
    text = decode_source(source, settings.PKB_MAX_SOURCE_BYTES)
    check_file_name(file_name)
    check_python(text)
    name = check_model_name(model)
    provider = check_provider(provider)
    if backend not in {b for b, _ in Submission._meta.get_field("backend").choices}:
        raise SubmissionError("unknown_backend", f"Unknown backend {backend!r}.", field="backend")
    target = resolve_target(problem, hardware)
    if sweep:
        check_sweep(target)
    if origin in ("upload", "api"):
        check_daily_cap(user)
        check_live_worker(target.hardware)
    # a person's upload credits the person (Submission.credit), never the shared model's provider
    provider = provider if AIModel.kind_for(name) == "model" else ""
    return create(user=user, target=target, backend=backend, model=get_model(name, provider),
                  text=text, origin=origin, sweep=sweep)


def create(*, user: Any, target: Target, backend: str, model: AIModel, text: str,
           origin: str, sweep: bool = False, dtype: str = "") -> Submission:
    """``dtype``: the evaluation's (`pkb eval --dtype`), blank for the problem's default."""
    with transaction.atomic():
        submission = Submission(
            user=user, model=model, problem_version=target.version, hardware=target.hardware,
            backend=backend, world_size=target.world_size, size=target.hardware.size,
            attempt=next_attempt(model, target.version, target.hardware), source=text,
            source_sha256=hashlib.sha256(text.encode()).hexdigest(), origin=origin, dtype=dtype,
            sweep_status=SweepStatus.WAITING if sweep else SweepStatus.NONE)
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
        sweep=submission.sweep_requested,
        sweep_sizes=list(settings.PKB_SWEEP_SIZES_CPU) if submission.sweep_requested and hardware.device == "cpu" else None,
        sweep_timeout_s=float(settings.PKB_SWEEP_TIMEOUT_S) if submission.sweep_requested else 0.0,
        # On CPUs the other shape parameters stay at the preset the CPU evaluates (small), as the
        # sizes do: a GEMM's default hidden size in float64 on gloo would take minutes per size.
        sweep_base=hardware.size if submission.sweep_requested and hardware.device == "cpu" else None,
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


def redispatch_lost(now: Any = None) -> int:
    """Send again every queued submission whose dispatch never happened: the web process died
    between the commit and the send, so no task exists. A fresh secret goes with the new task;
    should the first send have happened after all, its task holds a secret that no longer
    matches, so only one result can ever be stored."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.PKB_DISPATCH_GRACE_S)
    lost = list(Submission.objects.filter(status=Status.QUEUED, task_id="", created_at__lt=cutoff)
                .values_list("pk", flat=True))
    for pk in lost:
        with transaction.atomic():
            sub = Submission.objects.select_for_update().get(pk=pk)
            if sub.status != Status.QUEUED or sub.task_id:
                continue
            token = issue_secret(sub)
            sub.save(update_fields=["token_hash"])
            log.warning("submission %s had no task; sending it again", pk)
            transaction.on_commit(lambda pk=pk, token=token: dispatch(pk, token))
    return len(lost)
