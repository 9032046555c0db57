"""The portal asks the workers which queues they serve; uploads to hardware none serves are refused."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from portal.submissions.models import Submission
from portal.submissions.workers import forget, liveness

from .conftest import VALID_SOURCE, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def upload(**fields: Any) -> dict[str, Any]:
    return {"source": SimpleUploadedFile("solution.py", VALID_SOURCE.encode()),
            "problem": "all-reduce", **fields}


@pytest.fixture
def strict(settings: Any) -> None:
    settings.PKB_REQUIRE_LIVE_WORKER = True
    settings.PKB_WORKER_LIVENESS_TTL_S = 30
    forget()


@pytest.fixture
def live_worker(celery_worker_process: Any, cpu_hardware: Any) -> Any:
    """The real test worker, once it answers the broadcast for the test CPU's queue."""
    def answers() -> bool:
        forget()
        return bool(liveness().serves(cpu_hardware.queue))

    wait_for(answers, timeout_s=60, every_s=1)
    return celery_worker_process


def test_hardware_with_no_worker_is_refused_and_nothing_stored(
        strict: None, owner_api: Any, all_reduce: Any, gpu_hardware: Any) -> None:
    r = owner_api.post("/api/v1/submissions/", upload(hardware=gpu_hardware.slug), format="multipart")
    assert r.status_code == 503, r.content
    error = r.json()["error"]
    assert error["code"] == "no_worker" and error["field"] == "hardware"
    assert gpu_hardware.queue in error["message"]
    assert r["Retry-After"] == "60"
    assert not Submission.objects.exists()


def test_a_live_worker_is_seen_and_its_hardware_accepts(
        strict: None, live_worker: Any, owner_api: Any, anonymous_api: Any, all_reduce: Any,
        cpu_hardware: Any, gpu_hardware: Any, no_dispatch: list[int]) -> None:
    rows = {h["slug"]: h for h in anonymous_api.get("/api/v1/hardware/").json()["results"]}
    assert rows[cpu_hardware.slug]["live_workers"] == 1
    assert rows[gpu_hardware.slug]["live_workers"] == 0
    r = owner_api.post("/api/v1/submissions/", upload(hardware=cpu_hardware.slug), format="multipart")
    assert r.status_code == 201, r.content
    # no hardware named: the only one with a live worker is the obvious choice
    r = owner_api.post("/api/v1/submissions/", upload(), format="multipart")
    assert r.status_code == 201, r.content
    assert r.json()["hardware"] == cpu_hardware.slug
    # and it is the prompt's default
    assert anonymous_api.get("/api/v1/prompt/?problem=all-reduce").json()["hardware"] \
        == cpu_hardware.slug
    assert len(no_dispatch) == 2


def test_the_upload_form_defaults_to_hardware_with_a_worker(
        strict: None, live_worker: Any, client: Any, owner: Any, all_reduce: Any,
        cpu_hardware: Any, gpu_hardware: Any) -> None:
    client.force_login(owner)
    page = client.get("/submissions/upload/").content.decode()
    assert f'<option value="{cpu_hardware.slug}" selected>' in page
    assert "1 live worker" in page and "no worker: refused now" in page


def test_the_hardware_page_shows_liveness(strict: None, live_worker: Any, client: Any,
                                          cpu_hardware: Any, gpu_hardware: Any) -> None:
    page = client.get("/hardware/").content.decode()
    assert "1 live worker" in page and "no worker" in page


def test_the_upload_page_refuses_hardware_with_no_worker(
        strict: None, client: Any, owner: Any, all_reduce: Any, gpu_hardware: Any) -> None:
    client.force_login(owner)
    r = client.post("/submissions/upload/", {
        "problem": "all-reduce", "hardware": gpu_hardware.slug, "backend": "torch",
        "model": "human", "provider": "",
        "source": SimpleUploadedFile("solution.py", VALID_SOURCE.encode())})
    assert r.status_code == 503
    assert f"No worker serves {gpu_hardware.slug}" in r.content.decode()
    assert not Submission.objects.exists()
