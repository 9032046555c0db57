"""POST /api/v1/submissions/: auth, throttles, the daily cap and every kind of bad input."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from portal.submissions.models import AIModel, Submission

from .conftest import VALID_SOURCE

URL = "/api/v1/submissions/"
pytestmark = pytest.mark.django_db


def form(source: bytes, **extra: Any) -> dict[str, Any]:
    data = {"problem": "all-reduce", "backend": "torch", "model": "gpt-test", "provider": "acme",
            "source": SimpleUploadedFile("solution.py", source, content_type="text/x-python")}
    data.update(extra)
    return data


@pytest.fixture
def target(all_reduce: Any, cpu_hardware: Any) -> dict[str, str]:
    return {"hardware": cpu_hardware.slug}


def test_it_accepts_a_multipart_upload(owner_api: Any, target: dict[str, str]) -> None:
    r = owner_api.post(URL, form(VALID_SOURCE.encode(), **target), format="multipart")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["status"] == "queued" and body["queue_position"] == 1
    assert body["model"] == "gpt-test" and body["provider"] == "acme" and body["attempt"] == 1
    assert body["world_size"] == 2 and body["size"] == "small"
    assert body["source"] == VALID_SOURCE  # the owner sees the source
    sub = Submission.objects.get()
    assert sub.problem_version.is_current and sub.token_hash


def test_it_accepts_json_text_and_counts_attempts(owner_api: Any, target: dict[str, str]) -> None:
    payload = {"problem": "all-reduce", "model": "gpt-test", "source": VALID_SOURCE, **target}
    first = owner_api.post(URL, payload, format="json")
    second = owner_api.post(URL, payload, format="json")
    assert (first.status_code, second.status_code) == (201, 201)
    assert [first.json()["attempt"], second.json()["attempt"]] == [1, 2]
    assert AIModel.objects.get(name="gpt-test").kind == "model"


def test_it_rejects_anonymous_submissions(anonymous_api: Any, target: dict[str, str]) -> None:
    r = anonymous_api.post(URL, form(VALID_SOURCE.encode(), **target), format="multipart")
    assert r.status_code == 401
    assert not Submission.objects.exists()


def test_it_rejects_a_bad_token(anonymous_api: Any, target: dict[str, str]) -> None:
    anonymous_api.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    r = anonymous_api.post(URL, form(VALID_SOURCE.encode(), **target), format="multipart")
    assert r.status_code == 401


@pytest.mark.parametrize("source, status, code", [
    (b"x = 1\n" * 60_000, 413, "source_too_large"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00binary", 400, "binary_source"),
    ("def solution(x):\n    return 'caf\u00e9'\n".encode("latin-1"), 400, "not_utf8"),
    (b"def solution(x:\n    return x\n", 400, "syntax_error"),
    # Nested past Python's parser: MemoryError and RecursionError, not SyntaxError (a 500 before)
    (b"def solution(x):\n    return x\n\nNESTED = " + b"-" * 8000 + b"1\n", 400, "syntax_error"),
    (b"def solution(x):\n    return x\n\nNESTED = x" + b".a" * 50_000 + b"\n", 400, "syntax_error"),
    (b"def helper(x):\n    return x\n", 400, "missing_solution"),
    (b"   \n", 400, "empty_source"),
])
def test_it_rejects_bad_sources_and_stores_nothing(owner_api: Any, target: dict[str, str],
                                                   source: bytes, status: int, code: str) -> None:
    r = owner_api.post(URL, form(source, **target), format="multipart")
    assert r.status_code == status, r.content
    assert r.json()["error"]["code"] == code
    assert r.json()["error"]["message"]
    assert not Submission.objects.exists() and not AIModel.objects.exists()


def test_it_rejects_oversized_json_text(owner_api: Any, target: dict[str, str]) -> None:
    payload = {"problem": "all-reduce", "source": "x = 1\n" * 60_000, **target}
    r = owner_api.post(URL, payload, format="json")
    assert r.status_code == 413 and r.json()["error"]["code"] == "source_too_large"


@pytest.mark.parametrize("field, value, code", [
    ("problem", "no-such-problem", "unknown_problem"),
    ("hardware", "no-such-gpu", "unknown_hardware"),
    ("model", "", "bad_model_name"),
    ("model", "bad\nname", "bad_model_name"),
])
def test_it_rejects_unknown_targets(owner_api: Any, target: dict[str, str], field: str,
                                    value: str, code: str) -> None:
    r = owner_api.post(URL, form(VALID_SOURCE.encode(), **{**target, field: value}),
                       format="multipart")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["code"] == code and r.json()["error"]["field"] == field
    assert not Submission.objects.exists()


def test_it_rejects_a_missing_source(owner_api: Any, target: dict[str, str]) -> None:
    r = owner_api.post(URL, {"problem": "all-reduce", **target}, format="json")
    assert r.status_code == 400 and r.json()["error"]["code"] == "missing_source"


def test_it_rejects_an_unknown_backend(owner_api: Any, target: dict[str, str]) -> None:
    r = owner_api.post(URL, form(VALID_SOURCE.encode(), backend="fortran", **target),
                       format="multipart")
    assert r.status_code == 400 and r.json()["error"]["field"] == "backend"


def test_the_daily_cap_answers_429(owner_api: Any, target: dict[str, str], settings: Any) -> None:
    settings.PKB_DAILY_SUBMISSION_CAP = 2
    codes = [owner_api.post(URL, form(VALID_SOURCE.encode(), **target), format="multipart").status_code
             for _ in range(3)]
    assert codes == [201, 201, 429]
    assert Submission.objects.count() == 2


def test_staff_are_not_capped(staff_api: Any, target: dict[str, str], settings: Any) -> None:
    settings.PKB_DAILY_SUBMISSION_CAP = 1
    codes = [staff_api.post(URL, form(VALID_SOURCE.encode(), **target), format="multipart").status_code
             for _ in range(2)]
    assert codes == [201, 201]


def test_the_submit_throttle_is_per_user(owner_api: Any, other_api: Any, target: dict[str, str],
                                         settings: Any) -> None:
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "submit": "2/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    codes = [owner_api.post(URL, form(VALID_SOURCE.encode(), **target), format="multipart").status_code
             for _ in range(3)]
    assert codes == [201, 201, 429]
    assert other_api.post(URL, form(VALID_SOURCE.encode(), **target),
                          format="multipart").status_code == 201


def test_anonymous_reads_are_throttled(anonymous_api: Any, settings: Any, all_reduce: Any) -> None:
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "anon": "3/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    codes = [anonymous_api.get("/api/v1/problems/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
