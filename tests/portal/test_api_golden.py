"""Golden JSON of API responses: a changed shape is a deliberate, reviewed change.

Regenerate with PKB_UPDATE_GOLDEN=1 after checking the diff.
"""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from portal.catalog.models import Problem, ProblemVersion
from portal.submissions.models import AIModel, Submission

GOLDEN = Path(__file__).parent / "golden"
pytestmark = pytest.mark.django_db
VOLATILE = re.compile(r"_at$|^date$|^created$")


def scrub(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: scrub(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if VOLATILE.search(key) and value is not None:
        return "<time>"
    if key in ("id", "submission") and isinstance(value, int):
        return "<id>"
    if key == "url" and isinstance(value, str):
        return re.sub(r"/\d+/", "/<id>/", value)
    return value


def check(name: str, data: Any) -> None:
    path = GOLDEN / f"{name}.json"
    got = scrub(data)
    if os.environ.get("PKB_UPDATE_GOLDEN") or not path.exists():
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(path.read_text())


@pytest.fixture
def problem(db: None) -> Problem:
    p = Problem.objects.create(number=9001, slug="golden-problem", title="Golden problem",
                               source_codebase="Megatron-LM", source_function="m.py: f",
                               source_url="https://example.org/m", world_sizes=[2, 4])
    p.categories, p.collectives = ["tensor"], ["all_gather"]
    p.save()
    ProblemVersion.objects.create(
        problem=p, version="aaaabbbbccccdddd", is_current=True, title="Golden problem",
        description="A fixed problem for golden tests.", source_text="def reference(x, *, group):\n    return x\n",
        signature="def solution(x, *, group):", details={
            "sizes": {"small": {"n": 8}}, "dtypes": ["bfloat16"], "tolerances": {"bfloat16": [0.02, 0.02]},
            "world_size_note": "", "may_overwrite": [], "process_groups": {"2": {"group": [[0, 1]]}},
            "shapes": {"2": {"small": {"x": {"shape": [8], "dtype": "bfloat16"}}}},
            "traffic": {"2": {"small": {"link_bytes": 16.0, "hbm_bytes": 32.0, "flops": 8.0}}}})
    return p


@pytest.fixture
def finished(problem: Problem, cpu_hardware: Any, owner: Any, real_report: dict[str, Any]) -> Submission:
    cpu_hardware.slug = "cpu-golden"
    cpu_hardware.save()
    now = timezone.now()
    return Submission.objects.create(
        user=owner, model=AIModel.objects.create(name="golden-model", provider="lab"), attempt=1,
        problem_version=problem.current_version(), hardware=cpu_hardware, backend="triton",
        world_size=2, size="small", source="def solution(x, *, group):\n    return x\n",
        source_sha256="0" * 64, status="finished", created_at=now, started_at=now, finished_at=now,
        report=real_report, verdict="pass", speedup=1.5, candidate_ms=0.2, reference_ms=0.3)


@pytest.fixture
def with_interval(finished: Submission, interval_report: dict[str, Any]) -> Submission:
    """A second model's result from a schema 1.3 report, finished a minute before ``finished``."""
    earlier = finished.finished_at - timedelta(minutes=1)
    return Submission.objects.create(
        user=finished.user, model=AIModel.objects.create(name="interval-model", provider="lab"), attempt=1,
        problem_version=finished.problem_version, hardware=finished.hardware, backend="cuda",
        world_size=2, size="small", source="def solution(x, *, group):\n    return x\n",
        source_sha256="1" * 64, status="finished", created_at=earlier, started_at=earlier,
        finished_at=earlier, report=interval_report, verdict="pass", speedup=1.19, speedup_low=1.17,
        speedup_high=1.21, candidate_ms=0.25, reference_ms=0.298)


def test_problem_detail(anonymous_api: Any, problem: Problem) -> None:
    check("problem_detail", anonymous_api.get("/api/v1/problems/golden-problem/").json())


def test_problem_list(anonymous_api: Any, problem: Problem) -> None:
    check("problem_list", anonymous_api.get("/api/v1/problems/").json())


def test_submission_detail_for_its_owner(owner_api: Any, finished: Submission) -> None:
    body = owner_api.get(f"/api/v1/submissions/{finished.pk}/").json()
    body["report"] = sorted(body["report"])  # the report is the evaluator's: only its keys here
    check("submission_detail", body)


def test_model_leaderboard(anonymous_api: Any, finished: Submission) -> None:
    check("model_leaderboard", anonymous_api.get("/api/v1/leaderboards/models/",
                                                 {"hardware": "cpu-golden"}).json())


def test_problem_leaderboard(anonymous_api: Any, finished: Submission) -> None:
    check("problem_leaderboard", anonymous_api.get("/api/v1/leaderboards/problems/golden-problem/",
                                                   {"hardware": "cpu-golden"}).json())


def test_submission_detail_with_an_interval(anonymous_api: Any, with_interval: Submission) -> None:
    body = anonymous_api.get(f"/api/v1/submissions/{with_interval.pk}/").json()
    body["report"] = sorted(body["report"])
    check("submission_detail_interval", body)


def test_model_leaderboard_with_an_interval(anonymous_api: Any, with_interval: Submission) -> None:
    check("model_leaderboard_interval", anonymous_api.get("/api/v1/leaderboards/models/",
                                                          {"hardware": "cpu-golden"}).json())


def test_problem_leaderboard_with_an_interval(anonymous_api: Any, with_interval: Submission) -> None:
    check("problem_leaderboard_interval", anonymous_api.get(
        "/api/v1/leaderboards/problems/golden-problem/", {"hardware": "cpu-golden"}).json())


def test_the_openapi_schema_documents_the_interval(anonymous_api: Any) -> None:
    schema = anonymous_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    fields = schema["components"]["schemas"]["SubmissionDetail"]["properties"]
    for end in ("speedup_low", "speedup_high"):
        assert fields[end]["type"] == "number" and fields[end]["nullable"] is True
        assert "interval" in fields[end]["description"]


def test_prompt(anonymous_api: Any, problem: Problem, cpu_hardware: Any) -> None:
    cpu_hardware.slug = "cpu-golden"
    cpu_hardware.save()
    check("prompt", anonymous_api.get("/api/v1/prompt/", {"problem": "golden-problem",
                                                          "hardware": "cpu-golden",
                                                          "backend": "cuda"}).json())
