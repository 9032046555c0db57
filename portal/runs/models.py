"""A run: one model's sample set under stated conditions, and the files it was given.

A sample is an ordinary submission (evaluated, reported and ranked like any other); the link
lives here, in ``RunSample``, so submissions need not know runs exist. A file the run refused
(broken, unmapped to a problem, over the per-problem limit) is a ``RunSample`` without a
submission, kept so that the run page accounts for every file it was given.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from portal.catalog.models import Hardware, Problem
from portal.submissions.models import BACKENDS, AIModel, Submission

PRECISIONS = [("bf16", "bf16"), ("fp16", "fp16"), ("fp32", "fp32"), ("fp8", "fp8")]


class Run(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="runs")
    model = models.ForeignKey(AIModel, on_delete=models.PROTECT, related_name="runs")
    provider = models.CharField(max_length=100, blank=True)
    sampling = models.JSONField(default=dict, blank=True,
                                help_text="sampling settings as the researcher states them "
                                          "(temperature, top_p, max_tokens, seed, ...)")
    backend = models.CharField(max_length=20, choices=BACKENDS, default="cuda")
    precision = models.CharField(max_length=10, choices=PRECISIONS, default="bf16")
    hardware = models.ForeignKey(Hardware, on_delete=models.PROTECT, related_name="runs")
    k = models.PositiveIntegerField(help_text="samples per problem the run intends")
    note = models.TextField(blank=True)
    link = models.URLField(blank=True, max_length=500)
    imported_from = models.CharField(max_length=300, blank=True,
                                     help_text="the ParallelKernelBench directory it came from")
    seeded_from = models.CharField(max_length=300, blank=True,
                                   help_text="the committed results file it was seeded from "
                                             "(portal/runs/board_seed.py); blank: a run made here")
    files_planned = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="how many files of its directory the import accepts (docs/measurements/board/"
                  "plan.json); set on seeded runs, whose board may not have reached them all yet")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"run {self.pk} {self.model} on {self.hardware}"

    @property
    def label(self) -> str:
        """How charts and tables name the run beside others of the same model."""
        return f"run {self.pk}: {self.model.name}"

    def get_absolute_url(self) -> str:
        return reverse("runs:detail", args=[self.pk])


class RunSample(models.Model):
    """One file given to a run: accepted (a submission) or refused (with the reason)."""

    ACCEPTED, REJECTED = "accepted", "rejected"
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="samples")
    submission = models.OneToOneField(Submission, null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="run_sample")
    problem = models.ForeignKey(Problem, null=True, blank=True, on_delete=models.PROTECT,
                                related_name="run_samples")
    name = models.CharField(max_length=300, blank=True, help_text="the file's name as given")
    index = models.PositiveIntegerField(null=True, blank=True,
                                        help_text="sample number within its problem, from 0")
    status = models.CharField(max_length=10, choices=[(ACCEPTED, ACCEPTED), (REJECTED, REJECTED)])
    code = models.CharField(max_length=40, blank=True, help_text="why it was refused, for bots")
    message = models.TextField(blank=True)
    pkb_id = models.PositiveIntegerField(null=True, blank=True,
                                         help_text="the ParallelKernelBench problem it answers")
    adapter = models.CharField(max_length=100, blank=True,
                               help_text="the calling-convention adapter wrapped around it")
    turn = models.PositiveIntegerField(null=True, blank=True, help_text="agent loop turn, from 1")
    context = models.TextField(blank=True, help_text="what the agent was told before this turn")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "problem__number", "index", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["run", "problem", "index"], name="unique_run_sample_index",
                                    condition=models.Q(status="accepted")),
        ]

    def __str__(self) -> str:
        return f"{self.run} {self.name or self.problem} {self.status}"
