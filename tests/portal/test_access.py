"""Who may see what (docs/portal.md, "Who may see what"): another user's private source on the
page and in the API, another user's submissions, the worker endpoints without the job's
secret, and tokens that were revoked or have expired."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from portal.submissions.lifecycle import issue_secret
from portal.submissions.models import Submission
from portal.submissions.services import submit

from .conftest import VALID_SOURCE

pytestmark = pytest.mark.django_db
SECRET_LINE = "dist.all_reduce(out, group=group)"


@pytest.fixture
def owned(owner: Any, all_reduce: Any, cpu_hardware: Any) -> Submission:
    return submit(user=owner, problem="all-reduce", hardware=cpu_hardware.slug, backend="torch",
                  model="human", source=VALID_SOURCE.encode())


def test_another_users_source_stays_off_their_submission_page(client: Any, other: Any, owner: Any,
                                                              owned: Submission) -> None:
    client.force_login(other)
    page = client.get(f"/submissions/{owned.pk}/").content.decode()
    assert SECRET_LINE not in page
    client.force_login(owner)
    assert SECRET_LINE in client.get(f"/submissions/{owned.pk}/").content.decode()


def test_anonymous_visitors_do_not_see_a_private_source(client: Any, anonymous_api: Any,
                                                        owned: Submission) -> None:
    assert SECRET_LINE not in client.get(f"/submissions/{owned.pk}/").content.decode()
    body = anonymous_api.get(f"/api/v1/submissions/{owned.pk}/").json()
    assert "source" not in body or not body["source"]


def test_another_users_submissions_are_not_listed_on_their_accounts_page(
        client: Any, other: Any, owned: Submission) -> None:
    client.force_login(other)
    page = client.get("/accounts/").content.decode()
    assert f"/submissions/{owned.pk}/" not in page


def test_another_users_submission_cannot_be_posted_to_by_a_user(other_api: Any, owned: Submission) -> None:
    """User tokens are no worker secrets: a user cannot file a result for anyone's job."""
    url = f"/api/v1/worker/submissions/{owned.pk}/report/"
    other_api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get(user__username='other').key}")
    assert other_api.post(url, {"error": "x", "worker": "w"}, format="json").status_code in (401, 403)
    owned.refresh_from_db()
    assert owned.status == "queued"


@pytest.mark.parametrize("header", ["", "Worker", "Worker not-the-secret", "Token abc", "Bearer abc"])
@pytest.mark.parametrize("route", ["status", "report"])
def test_worker_endpoints_refuse_without_the_jobs_secret(anonymous_api: Any, owned: Submission,
                                                         header: str, route: str) -> None:
    if header:
        anonymous_api.credentials(HTTP_AUTHORIZATION=header)
    body = {"status": "running", "step": "", "worker": "w"} if route == "status" else \
        {"error": "forged", "worker": "w"}
    r = anonymous_api.post(f"/api/v1/worker/submissions/{owned.pk}/{route}/", body, format="json")
    assert r.status_code in (401, 403), r.content
    owned.refresh_from_db()
    assert owned.status == "queued" and not owned.status_reason


def test_one_jobs_secret_does_not_open_another_job(anonymous_api: Any, owner: Any, all_reduce: Any,
                                                   cpu_hardware: Any) -> None:
    first = submit(user=owner, problem="all-reduce", hardware=cpu_hardware.slug, backend="torch",
                   model="human", source=VALID_SOURCE.encode())
    second = submit(user=owner, problem="all-reduce", hardware=cpu_hardware.slug, backend="torch",
                    model="human", source=VALID_SOURCE.encode())
    secret = issue_secret(first)
    first.save()
    anonymous_api.credentials(HTTP_AUTHORIZATION=f"Worker {secret}")
    r = anonymous_api.post(f"/api/v1/worker/submissions/{second.pk}/report/",
                           {"error": "forged", "worker": "w"}, format="json")
    assert r.status_code == 403
    ok = anonymous_api.post(f"/api/v1/worker/submissions/{first.pk}/status/",
                            {"status": "compiling", "step": "", "worker": "w"}, format="json")
    assert ok.status_code == 200  # the control: the right secret works


def test_a_revoked_token_no_longer_works(owner: Any, client: Any, all_reduce: Any) -> None:
    old = Token.objects.create(user=owner).key
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {old}")
    assert api.get("/api/v1/submissions/").status_code == 200
    client.force_login(owner)
    client.post("/accounts/token/")  # "new token" on the accounts page revokes the old one
    assert not Token.objects.filter(key=old).exists()
    r = api.get("/api/v1/submissions/")
    assert r.status_code == 401


def api_with_token_aged(owner: Any, days: int) -> tuple[APIClient, Token]:
    token = Token.objects.create(user=owner)
    Token.objects.filter(pk=token.pk).update(created=timezone.now() - timedelta(days=days))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api, token


def test_an_expired_token_is_refused_with_what_to_do(owner: Any, settings: Any) -> None:
    settings.PKB_TOKEN_MAX_AGE_DAYS = 30
    api, token = api_with_token_aged(owner, 31)
    r = api.get("/api/v1/submissions/")
    assert r.status_code == 401
    assert "expired" in str(r.json()) and "/api/v1/auth/token/" in str(r.json())
    fresh = APIClient().post("/api/v1/auth/token/", {"username": "owner", "password": "owner-pass-123"})
    assert fresh.status_code == 200 and fresh.json()["token"] != token.key
    api.credentials(HTTP_AUTHORIZATION=f"Token {fresh.json()['token']}")
    assert api.get("/api/v1/submissions/").status_code == 200


def test_a_token_within_its_age_works(owner: Any, settings: Any) -> None:
    settings.PKB_TOKEN_MAX_AGE_DAYS = 30
    api, _ = api_with_token_aged(owner, 29)
    assert api.get("/api/v1/submissions/").status_code == 200
