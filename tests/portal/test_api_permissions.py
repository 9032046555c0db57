"""Reads are public, writes need a token, a submission's source is its owner's."""

from __future__ import annotations

from typing import Any

import pytest

from portal.submissions.services import submit

from .conftest import VALID_SOURCE

pytestmark = pytest.mark.django_db


@pytest.fixture
def owned(owner: Any, all_reduce: Any, cpu_hardware: Any) -> Any:
    return submit(user=owner, problem="all-reduce", hardware=cpu_hardware.slug, backend="torch",
                  model="human", source=VALID_SOURCE.encode())


def test_anyone_reads_problems_and_hardware(anonymous_api: Any, all_reduce: Any,
                                            cpu_hardware: Any) -> None:
    assert anonymous_api.get("/api/v1/problems/").status_code == 200
    assert anonymous_api.get("/api/v1/problems/all-reduce/").status_code == 200
    assert anonymous_api.get(f"/api/v1/hardware/{cpu_hardware.slug}/").status_code == 200


def test_anyone_sees_a_submissions_status_but_not_its_source(anonymous_api: Any, owned: Any) -> None:
    body = anonymous_api.get(f"/api/v1/submissions/{owned.pk}/").json()
    assert body["status"] == "queued" and body["source"] is None


def test_another_user_does_not_see_the_source(other_api: Any, owned: Any) -> None:
    assert other_api.get(f"/api/v1/submissions/{owned.pk}/").json()["source"] is None


def test_the_owner_and_staff_see_the_source(owner_api: Any, staff_api: Any, owned: Any) -> None:
    assert owner_api.get(f"/api/v1/submissions/{owned.pk}/").json()["source"] == VALID_SOURCE
    assert staff_api.get(f"/api/v1/submissions/{owned.pk}/").json()["source"] == VALID_SOURCE


def test_the_list_holds_only_your_own_submissions(owner_api: Any, other_api: Any, owned: Any) -> None:
    assert owner_api.get("/api/v1/submissions/").json()["count"] == 1
    assert other_api.get("/api/v1/submissions/").json()["count"] == 0


def test_the_list_needs_authentication(anonymous_api: Any) -> None:
    assert anonymous_api.get("/api/v1/submissions/").status_code == 401


def test_the_upload_page_needs_a_login(client: Any, all_reduce: Any) -> None:
    r = client.get("/submissions/upload/")
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]


def test_the_token_endpoint_trades_a_password_for_a_token(anonymous_api: Any, owner: Any) -> None:
    r = anonymous_api.post("/api/v1/auth/token/", {"username": "owner", "password": "owner-pass-123"})
    assert r.status_code == 200 and r.json()["token"]
    bad = anonymous_api.post("/api/v1/auth/token/", {"username": "owner", "password": "nope"})
    assert bad.status_code == 400


def test_schema_and_docs_are_served(anonymous_api: Any) -> None:
    schema = anonymous_api.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/submissions/" in schema.content
    assert anonymous_api.get("/api/docs/").status_code == 200
