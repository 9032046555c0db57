"""Runs, their files and agent turns for hardware no live worker serves are refused as a single
upload is (503 no_worker, Retry-After, nothing stored): nothing would evaluate them."""

from __future__ import annotations

from typing import Any

import pytest

from portal.runs.models import Run, RunSample
from portal.submissions.models import Submission
from portal.submissions.workers import Liveness

from .conftest import VALID_SOURCE
from .runs_helpers import CATALOG, TEST_PKB_INDEX, load_problems, pack, pkb_files

pytestmark = pytest.mark.django_db


@pytest.fixture
def served(settings: Any, monkeypatch: pytest.MonkeyPatch, cpu_hardware: Any) -> dict[str, int]:
    """Workers per queue as the broker would answer: one on the test CPU's queue to start with."""
    settings.PKB_REQUIRE_LIVE_WORKER = True
    workers = {cpu_hardware.queue: 1}
    monkeypatch.setattr("portal.submissions.services.liveness", lambda: Liveness(True, workers))
    return workers


def _upload(name: str, data: bytes) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def _assert_no_worker(r: Any, hardware: Any) -> None:
    assert r.status_code == 503, r.content
    error = r.json()["error"]
    assert error["code"] == "no_worker" and error["field"] == "hardware", error
    assert hardware.slug in error["message"] and r["Retry-After"] == "60"


def test_a_run_on_hardware_without_a_worker_is_refused(served: dict[str, int], owner_api: Any,
                                                       gpu_hardware: Any, cpu_hardware: Any) -> None:
    r = owner_api.post("/api/v1/runs/", {"model": "m", "hardware": gpu_hardware.slug, "k": 1}, format="json")
    _assert_no_worker(r, gpu_hardware)
    assert cpu_hardware.slug in r.json()["error"]["message"]  # where a worker is
    assert not Run.objects.exists()


def test_samples_for_a_run_whose_worker_went_away_are_refused(
        served: dict[str, int], owner_api: Any, cpu_hardware: Any, all_reduce: Any,
        no_dispatch: list[int]) -> None:
    run = owner_api.post("/api/v1/runs/", {"model": "m", "hardware": cpu_hardware.slug, "k": 2},
                         format="json").json()
    served.clear()
    one = owner_api.post(f"/api/v1/runs/{run['id']}/samples/",
                         {"problem": "all-reduce", "source": VALID_SOURCE, "turn": 1}, format="json")
    _assert_no_worker(one, cpu_hardware)
    archive = owner_api.post(f"/api/v1/runs/{run['id']}/samples/",
                             {"archive": _upload("s.zip", pack({"all-reduce/0.py": VALID_SOURCE.encode()}))},
                             format="multipart")
    _assert_no_worker(archive, cpu_hardware)
    assert not RunSample.objects.exists() and not Submission.objects.exists() and not no_dispatch


def test_a_pkb_import_and_its_dry_run_are_refused_without_a_worker(
        served: dict[str, int], owner_api: Any, cpu_hardware: Any, all_reduce: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    load_problems(CATALOG)
    monkeypatch.setattr("portal.runs.pkb.importer.pkb_index", lambda: TEST_PKB_INDEX)
    served.clear()
    for query in ("?dry_run=1", ""):
        r = owner_api.post(f"/api/v1/runs/pkb-import/{query}", {
            "archive": _upload("d.zip", pack(pkb_files())), "hardware": cpu_hardware.slug}, format="multipart")
        _assert_no_worker(r, cpu_hardware)
    assert not Run.objects.exists() and not Submission.objects.exists()
