"""Problems, their versions, and hardware profiles, mirrored from problems/ and hardware/."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.urls import reverse

from .querysets import HardwareQuerySet, ProblemQuerySet


def _tags(values: list[str] | tuple[str, ...]) -> str:
    # Delimited so that `__contains=",expert,"` filters portably on SQLite and PostgreSQL.
    return "," + ",".join(values) + "," if values else ""


def _untag(text: str) -> list[str]:
    return [v for v in text.split(",") if v]


class Problem(models.Model):
    number = models.PositiveIntegerField(unique=True, help_text="the problem's stable id")
    slug = models.SlugField(unique=True, max_length=100)
    title = models.CharField(max_length=200)
    category_tags = models.CharField(max_length=300, blank=True)
    collective_tags = models.CharField(max_length=300, blank=True)
    tag_text = models.CharField(max_length=300, blank=True)
    source_codebase = models.CharField(max_length=100, blank=True)
    source_function = models.CharField(max_length=300, blank=True)
    source_url = models.URLField(blank=True)
    world_sizes = models.JSONField(default=list)
    retired = models.BooleanField(default=False, help_text="no longer in problems/")
    updated_at = models.DateTimeField(auto_now=True)

    objects = ProblemQuerySet.as_manager()

    class Meta:
        ordering = ["number"]

    def __str__(self) -> str:
        return f"{self.number} {self.slug}"

    def get_absolute_url(self) -> str:
        return reverse("catalog:problem-detail", args=[self.slug])

    @property
    def categories(self) -> list[str]:
        return _untag(self.category_tags)

    @categories.setter
    def categories(self, values: list[str]) -> None:
        self.category_tags = _tags(values)

    @property
    def collectives(self) -> list[str]:
        return _untag(self.collective_tags)

    @collectives.setter
    def collectives(self, values: list[str]) -> None:
        self.collective_tags = _tags(values)

    @property
    def tags(self) -> list[str]:
        return _untag(self.tag_text)

    def current_version(self) -> ProblemVersion | None:
        return self.versions.filter(is_current=True).first()


class ProblemVersion(models.Model):
    """One content hash of a problem module. Submissions point here, never at the problem alone,
    so a changed reference or shape never re-scores old results."""

    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="versions")
    version = models.CharField(max_length=64)
    is_current = models.BooleanField(default=False)
    source_recorded = models.BooleanField(default=True, help_text="false: known only from a report")
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    source_text = models.TextField(blank=True)
    signature = models.TextField(blank=True)
    details = models.JSONField(default=dict, help_text="sizes, dtypes, tolerances, shapes, traffic")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["problem", "version"], name="unique_problem_version"),
        ]

    def __str__(self) -> str:
        return f"{self.problem.slug}@{self.version}"

    def shapes(self, world_size: int, size: str) -> dict[str, Any]:
        return self.details.get("shapes", {}).get(str(world_size), {}).get(size, {})

    def traffic(self, world_size: int, size: str) -> dict[str, float] | None:
        return self.details.get("traffic", {}).get(str(world_size), {}).get(size)


class Hardware(models.Model):
    """A hardware profile: one Celery queue, one leaderboard."""

    slug = models.SlugField(unique=True, max_length=100)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, default="gpu")  # "gpu" or "cpu"
    gpus = models.PositiveIntegerField(default=0)
    world_size = models.PositiveIntegerField(default=2, help_text="ranks of a ranked run")
    builtin = models.BooleanField(default=False, help_text="no evaluator profile: pass no --hardware")
    profile = models.JSONField(default=dict)
    retired = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = HardwareQuerySet.as_manager()

    class Meta:
        ordering = ["builtin", "slug"]
        verbose_name_plural = "hardware"

    def __str__(self) -> str:
        return self.slug

    def get_absolute_url(self) -> str:
        return reverse("catalog:hardware-detail", args=[self.slug])

    @property
    def device(self) -> str:
        return "cuda" if self.kind == "gpu" else "cpu"

    @property
    def size(self) -> str:
        """The size preset ranked on this hardware: CPUs run the small shapes."""
        return "default" if self.kind == "gpu" else "small"

    @property
    def queue(self) -> str:
        return f"pkb.hw.{self.slug}"

    @property
    def roofline(self) -> dict[str, Any] | None:
        block = self.profile.get("roofline")
        return block if isinstance(block, dict) and block.get("link_gbps") else None

    def ranked_world_size(self, world_sizes: list[int]) -> int | None:
        """The world size a problem runs at here: the hardware's, else the largest that fits."""
        if self.world_size in world_sizes:
            return self.world_size
        fitting = [w for w in world_sizes if w <= max(self.world_size, 2)]
        return max(fitting) if fitting else None


class ReferenceTiming(models.Model):
    """The reference alone, timed by ``pkb check-references --time`` on one hardware.

    Not a full evaluation: nothing was judged against a candidate in the same run. It is the
    baseline of a problem's leaderboard only where no full evaluator report on that hardware
    exists (a report times the reference beside its candidate, which is the fairer baseline).
    """

    KIND = "reference-only"

    problem_version = models.ForeignKey(ProblemVersion, on_delete=models.CASCADE,
                                        related_name="reference_timings")
    hardware = models.ForeignKey(Hardware, on_delete=models.CASCADE,
                                 related_name="reference_timings")
    world_size = models.PositiveIntegerField()
    size = models.CharField(max_length=20)
    kind = models.CharField(max_length=30, default=KIND, editable=False,
                            help_text="reference-only timing, not a full evaluation")
    median_ms = models.FloatField()
    p10_ms = models.FloatField(null=True, blank=True)
    p90_ms = models.FloatField(null=True, blank=True)
    roofline_ms = models.FloatField(null=True, blank=True)
    roofline_bound = models.CharField(max_length=20, blank=True)
    roofline_fraction = models.FloatField(null=True, blank=True)
    source_file = models.CharField(max_length=300, help_text="the check-references JSON it came from")
    command = models.CharField(max_length=300, blank=True)
    measured_on = models.DateField(null=True, blank=True)
    imported_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["problem_version", "hardware", "world_size", "size"],
                                    name="unique_reference_timing"),
        ]

    def __str__(self) -> str:
        return f"{self.problem_version} on {self.hardware} ({self.world_size}, {self.size})"
