"""Models (who wrote a kernel) and submissions (one kernel, one evaluation, one report)."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from portal.catalog.models import Hardware, ProblemVersion

from .querysets import SubmissionQuerySet


class AIModel(models.Model):
    """The producer of a kernel: an LLM, a person ("human") or the NCCL reference itself."""

    KINDS = [("model", "model"), ("human", "human"), ("reference", "reference")]
    name = models.CharField(max_length=100, unique=True)
    provider = models.CharField(max_length=100, blank=True)
    kind = models.CharField(max_length=20, choices=KINDS, default="model")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        db_table = "submissions_model"
        verbose_name = "model"

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def kind_for(name: str) -> str:
        return name if name in ("human", "reference") else "model"


class Status(models.TextChoices):
    QUEUED = "queued"
    COMPILING = "compiling"
    RUNNING = "running"
    FINISHED = "finished"  # the evaluator wrote a report (its verdict may be fail)
    FAILED = "failed"  # no report: the worker crashed, timed out, or the job was lost


PENDING = (Status.QUEUED, Status.COMPILING, Status.RUNNING)


class SweepStatus(models.TextChoices):
    """A requested message-size sweep (docs/sweeps.md): it runs after a passing evaluation."""

    NONE = "", "not requested"
    WAITING = "waiting", "waiting for the evaluation"
    RUNNING = "running", "running"
    FINISHED = "finished", "finished"  # a sweep report is stored (its verdict may be fail)
    FAILED = "failed", "failed"  # no sweep report: the worker's error, or the reaper
    SKIPPED = "skipped", "not run"  # the evaluation did not pass, so nothing was swept
BACKENDS = [("torch", "torch"), ("triton", "triton"), ("cuda", "cuda"), ("reference", "reference")]
ORIGINS = [("upload", "upload"), ("api", "api"), ("import", "import"), ("baseline", "baseline")]


class Submission(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                             related_name="submissions")
    model = models.ForeignKey(AIModel, on_delete=models.PROTECT, related_name="submissions")
    attempt = models.PositiveIntegerField(help_text="n-th try of this model at this problem here")
    problem_version = models.ForeignKey(ProblemVersion, on_delete=models.PROTECT,
                                        related_name="submissions")
    hardware = models.ForeignKey(Hardware, on_delete=models.PROTECT, related_name="submissions")
    backend = models.CharField(max_length=20, choices=BACKENDS, default="torch")
    world_size = models.PositiveIntegerField()
    size = models.CharField(max_length=20, default="default")
    dtype = models.CharField(max_length=20, blank=True, help_text="blank: the problem's default")
    source = models.TextField()
    source_sha256 = models.CharField(max_length=64)
    origin = models.CharField(max_length=20, choices=ORIGINS, default="upload")
    import_path = models.CharField(max_length=500, blank=True)
    credited_to = models.CharField(max_length=100, blank=True, help_text=(
        "an imported human kernel: who it is credited to (its committed seed's provider: the PKB "
        "team, or library code as a baseline row); blank: Submission.credit decides"))

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    status_reason = models.TextField(blank=True)
    progress = models.CharField(max_length=200, blank=True,
                                help_text="the worker's latest step while pending")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    compiling_at = models.DateTimeField(null=True, blank=True)
    running_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    token_hash = models.CharField(max_length=64, blank=True)

    report = models.JSONField(null=True, blank=True)
    verdict = models.CharField(max_length=10, blank=True)
    failure_class = models.CharField(max_length=40, blank=True)
    speedup = models.FloatField(null=True, blank=True)
    speedup_low = models.FloatField(null=True, blank=True,
                                    help_text="the speedup interval's lower end (reports of schema 1.3 on)")
    speedup_high = models.FloatField(null=True, blank=True,
                                     help_text="the speedup interval's upper end (reports of schema 1.3 on)")
    candidate_ms = models.FloatField(null=True, blank=True)
    reference_ms = models.FloatField(null=True, blank=True)
    roofline_fraction = models.FloatField(null=True, blank=True)

    sweep_status = models.CharField(max_length=20, choices=SweepStatus.choices, blank=True, default="",
                                    help_text="blank: no sweep was asked for")
    sweep = models.JSONField(null=True, blank=True, help_text="the sweep report (evaluator/sweep.schema.json)")
    sweep_reason = models.TextField(blank=True, help_text="why there is no sweep report")
    sweep_finished_at = models.DateTimeField(null=True, blank=True)

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "hardware", "created_at"]),
            models.Index(fields=["model", "hardware", "status"]),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.model} {self.problem_version} on {self.hardware}"

    def get_absolute_url(self) -> str:
        return reverse("submissions:detail", args=[self.pk])

    @property
    def problem(self):  # type: ignore[no-untyped-def]
        return self.problem_version.problem

    @property
    def is_pending(self) -> bool:
        return self.status in PENDING

    @property
    def sweep_requested(self) -> bool:
        return self.sweep_status != SweepStatus.NONE

    @property
    def sweep_pending(self) -> bool:
        return self.sweep_status in (SweepStatus.WAITING, SweepStatus.RUNNING)

    @property
    def is_correct(self) -> bool:
        return self.status == Status.FINISHED and self.verdict == "pass"

    def new_token(self) -> str:
        """A fresh secret for the worker's callbacks; only its hash is stored."""
        token = secrets.token_urlsafe(32)
        self.token_hash = hashlib.sha256(token.encode()).hexdigest()
        return token

    def token_matches(self, token: str) -> bool:
        if not self.token_hash or not token:
            return False
        digest = hashlib.sha256(token.encode()).hexdigest()
        return secrets.compare_digest(digest, self.token_hash)

    @property
    def credit(self) -> str:
        """Who a result is credited to: the person who uploaded a ``human`` kernel, or the provider
        its committed seed names (the shared ``human`` model's provider names only whoever first
        imported one: a library baseline and the team's own kernels are rows of their own), else
        the model's provider."""
        if self.model.kind == "human" and self.origin in ("upload", "api"):
            return self.user.username
        if self.model.kind == "human" and self.credited_to:
            return self.credited_to
        return self.model.provider

    def visible_source_to(self, user) -> bool:  # type: ignore[no-untyped-def]
        if self.origin in ("import", "baseline"):
            return True
        return bool(user.is_authenticated and (user.is_staff or user.pk == self.user_id))

    def report_for(self, user):  # type: ignore[no-untyped-def]
        """The report as ``user`` may read it: what quotes the source only where the source shows."""
        from portal.lib.reports import without_source_quotes

        return self.report if self.visible_source_to(user) else without_source_quotes(self.report)

    def sweep_for(self, user):  # type: ignore[no-untyped-def]
        """The sweep report as ``user`` may read it (each size's report as ``report_for``)."""
        from portal.lib.reports import sweep_without_source_quotes

        return self.sweep if self.visible_source_to(user) else sweep_without_source_quotes(self.sweep)

    def queue_position(self) -> int | None:
        """1 = next to run on its hardware; None once it has started."""
        if self.status != Status.QUEUED:
            return None
        ahead = Submission.objects.filter(
            hardware_id=self.hardware_id, status=Status.QUEUED, created_at__lt=self.created_at)
        if self.origin != "baseline":  # baselines wait on a side queue, not in front of users
            ahead = ahead.exclude(origin="baseline")
        return ahead.count() + 1

    def deadline(self, eval_timeout_s: int, grace_s: int, queue_timeout_s: int):  # type: ignore[no-untyped-def]
        from datetime import timedelta

        if self.status == Status.QUEUED:
            return self.created_at + timedelta(seconds=queue_timeout_s)
        if self.status in (Status.COMPILING, Status.RUNNING):
            started = self.started_at or self.created_at
            return started + timedelta(seconds=eval_timeout_s + grace_s)
        return None
