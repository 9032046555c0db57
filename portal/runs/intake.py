"""Which problem an archived file answers, in our own layout: ``<problem>/<anything>.py``,
``<problem>.py`` or ``<problem>__<anything>.py`` (any directories above are ignored)."""

from __future__ import annotations

from portal.catalog.models import Problem

from .archives import Entry, is_noise
from .services import FilePlan


def plans_from_archive(entries: list[Entry]) -> list[FilePlan]:
    known = set(Problem.objects.active().values_list("slug", flat=True))
    plans = []
    for entry in entries:
        if is_noise(entry.path):
            continue
        plan = FilePlan(name=entry.path, problem=problem_of(entry.path, known), source=entry.data)
        if entry.data is None:
            plan.refuse(entry.code, entry.message)
        elif not entry.path.endswith(".py"):
            plan.refuse("not_python", "not a .py file")
        elif plan.problem is None:
            plan.refuse("unknown_problem", "no problem named by its directory or file name "
                        "(<problem>/<n>.py, <problem>.py or <problem>__<n>.py); GET "
                        "/api/v1/problems/ lists the slugs")
        plans.append(plan)
    return plans


def problem_of(path: str, known: set[str]) -> str | None:
    parts = path.split("/")
    if len(parts) > 1 and parts[-2] in known:
        return parts[-2]
    stem = parts[-1].removesuffix(".py").split("__", 1)[0]
    return stem if stem in known else None
