from __future__ import annotations

from typing import Any

from django.db import models


class SubmissionQuerySet(models.QuerySet):
    def finished(self) -> SubmissionQuerySet:
        return self.filter(status="finished")

    def passing(self) -> SubmissionQuerySet:
        return self.filter(status="finished", verdict="pass")

    def pending(self) -> SubmissionQuerySet:
        return self.filter(status__in=("queued", "compiling", "running"))

    def on_track(self, hardware: Any, world_size: int | None = None) -> SubmissionQuerySet:
        """Ranked runs on one hardware: its size preset and world size (where given)."""
        qs = self.filter(hardware=hardware, size=hardware.size)
        return qs.filter(world_size=world_size) if world_size else qs

    def current_versions(self) -> SubmissionQuerySet:
        return self.filter(problem_version__is_current=True, problem_version__problem__retired=False)

    def owned_by(self, user: Any) -> SubmissionQuerySet:
        if not user.is_authenticated:
            return self.none()
        return self.filter(user=user)

    def ranked(self) -> SubmissionQuerySet:
        """Best first: correct, then by speedup."""
        return self.passing().order_by(models.F("speedup").desc(nulls_last=True), "finished_at")


def with_solved(problems: models.QuerySet, hardware_id: int | None = None) -> models.QuerySet:
    """Problems annotated with ``solved``: a passing submission by a model other than the
    reference (on ``hardware_id`` where given). Lives with submissions, which know problems,
    so that the catalog never needs to know submissions."""
    from .models import Submission

    passing = Submission.objects.passing().exclude(model__kind="reference")
    if hardware_id is not None:
        passing = passing.filter(hardware_id=hardware_id)
    # One list of solved problems, not EXISTS per problem: correlated, SQLite (make up) scanned
    # every finished submission's row once per problem, 0.2 s of each home page with the seeded
    # board (137 problems, 180 submissions); this is 2 ms.
    solved_ids = passing.values("problem_version__problem_id")
    return problems.annotate(solved=models.ExpressionWrapper(
        models.Q(pk__in=solved_ids), output_field=models.BooleanField()))
