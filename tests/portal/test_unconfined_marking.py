"""A result evaluated without the sandbox is marked on its page; confined and older ones are not."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from portal.submissions.models import AIModel, Submission

pytestmark = pytest.mark.django_db


def page_for(report: dict[str, Any], all_reduce: Any, cpu_hardware: Any, owner: Any) -> str:
    now = timezone.now()
    sub = Submission.objects.create(
        user=owner, model=AIModel.objects.create(name=f"m{len(str(report))}", provider="lab"), attempt=1,
        problem_version=all_reduce.current_version(), hardware=cpu_hardware, backend="triton", world_size=2,
        size="small", source="x", source_sha256="0" * 64, status="finished", created_at=now, started_at=now,
        finished_at=now, report=report, verdict="pass", speedup=1.0)
    return Client().get(f"/submissions/{sub.pk}/").content.decode()


@pytest.mark.parametrize("sandbox, marked", [("off", True), ("on", False), (None, False)])
def test_only_an_unconfined_result_carries_the_notice(sandbox, marked, real_report, all_reduce, cpu_hardware, owner):
    report = dict(real_report)
    report.pop("sandbox", None)
    if sandbox is not None:
        report["sandbox"] = sandbox
    page = page_for(report, all_reduce, cpu_hardware, owner)
    assert ('id="unconfined"' in page) is marked
    if marked:
        assert "without the sandbox" in page
