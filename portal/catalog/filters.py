"""The problem list's filters, parsed once from the query string."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from portal.submissions.querysets import with_solved
from problems.spec import CATEGORIES, COLLECTIVES

from .models import Hardware, Problem
from .querysets import ProblemQuerySet


@dataclass(frozen=True)
class ProblemFilter:
    q: str = ""
    category: str = ""
    codebase: str = ""
    collective: str = ""
    solved: str = ""  # "yes", "no" or ""
    hardware: str = ""  # solved on this hardware ("" = anywhere)

    @classmethod
    def from_query(cls, query: Mapping[str, Any]) -> ProblemFilter:
        return cls(**{k: str(query.get(k, "")).strip()[:100] for k in cls.__dataclass_fields__})

    def apply(self, qs: ProblemQuerySet) -> ProblemQuerySet:
        if self.category:
            qs = qs.in_category(self.category)
        if self.collective:
            qs = qs.using_collective(self.collective)
        if self.codebase:
            qs = qs.filter(source_codebase=self.codebase)
        qs = qs.search(self.q)
        hw = Hardware.objects.filter(slug=self.hardware).first() if self.hardware else None
        qs = with_solved(qs, hw.pk if hw else None)
        if self.solved == "yes":
            qs = qs.filter(solved=True)
        elif self.solved == "no":
            qs = qs.filter(solved=False)
        return qs

    def choices(self) -> dict[str, list[str]]:
        codebases = (Problem.objects.active().order_by("source_codebase")
                     .values_list("source_codebase", flat=True).distinct())
        return {"categories": list(CATEGORIES), "collectives": list(COLLECTIVES),
                "codebases": [c for c in codebases if c]}

    @property
    def active(self) -> bool:
        return any(getattr(self, k) for k in self.__dataclass_fields__)
