from __future__ import annotations

from django.db import models
from django.db.models import Q


class ProblemQuerySet(models.QuerySet):
    def active(self) -> ProblemQuerySet:
        return self.filter(retired=False)

    def in_category(self, category: str) -> ProblemQuerySet:
        return self.filter(category_tags__contains=f",{category},")

    def using_collective(self, collective: str) -> ProblemQuerySet:
        return self.filter(collective_tags__contains=f",{collective},")

    def search(self, text: str) -> ProblemQuerySet:
        text = text.strip()
        if not text:
            return self
        return self.filter(
            Q(title__icontains=text) | Q(slug__icontains=text) | Q(source_codebase__icontains=text)
            | Q(source_function__icontains=text) | Q(versions__description__icontains=text,
                                                    versions__is_current=True)
        ).distinct()


class HardwareQuerySet(models.QuerySet):
    def active(self) -> HardwareQuerySet:
        return self.filter(retired=False)
