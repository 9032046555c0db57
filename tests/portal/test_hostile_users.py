"""A hostile user's upload on its way to the leaderboard (red-team pass, 2026-11-28): what a
candidate's text can do to the worker's post, what an archive can do to the web process, what
a run's fields can put in the exports. docs/portal.md, "Hostile users", says what each was."""

from __future__ import annotations

import io
import json
import lzma
import tarfile
import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from portal.lib.reports import without_nul
from portal.submissions.models import Submission
from portal.submissions.services import create, get_model, resolve_target

from .conftest import VALID_SOURCE

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(owner: Any, all_reduce: Any, cpu_hardware: Any) -> tuple[Submission, str]:
    sub = create(user=owner, target=resolve_target("all-reduce", cpu_hardware.slug),
                 backend="torch", model=get_model("human"), text=VALID_SOURCE, origin="upload")
    token = sub.new_token()
    sub.save()
    return sub, token


def worker_post(sub: Submission, what: str, token: str, body: dict[str, Any]) -> Any:
    # As worker/callback.py sends it: json.dumps, which writes a lone surrogate as "\ud800".
    client = APIClient(raise_request_exception=False)
    return client.post(f"/api/v1/worker/submissions/{sub.pk}/{what}/", json.dumps(body),
                       content_type="application/json", HTTP_AUTHORIZATION=f"Worker {token}")


def test_a_lone_surrogate_a_candidate_raised_is_stored_replaced_and_the_failure_counts(
        job: Any, real_report: dict[str, Any]) -> None:
    # `raise RuntimeError("\ud800")` reaches the report as it is (the evaluator writes it as
    # "\ud800", 2026-11-28). PostgreSQL refused it: the post got a 500, the worker retried it for
    # hours holding its queue, and the reaper at last failed the job: a fail that never counted.
    sub, token = job
    message = "rank 0: RuntimeError while running the solution: boom \ud800 lone \udcff"
    report = dict(real_report, verdict="fail", timing=None,
                  failure={"failure_class": "runtime_error", "message": message, "rank": 0,
                           "trial": None, "output": None, "traceback": "RuntimeError: boom \ud800",
                           "compiler_output": None, "stacks": {}, "stderr": {"0": "printed \ud800"}})
    assert worker_post(sub, "status", token, {"status": "running", "step": "trial \udc80"}).status_code == 200
    r = worker_post(sub, "report", token, {"report": report, "worker": "w1"})
    assert r.status_code == 200, r.content
    sub.refresh_from_db()
    assert sub.status == "finished" and sub.verdict == "fail" and sub.failure_class == "runtime_error"
    assert sub.report["failure"]["message"].endswith("boom \ufffd lone \ufffd")
    assert sub.progress == ""
    # A pair in JSON is one character, not two surrogates: it stays.
    assert without_nul(json.loads('["\\ud83d\\ude00", {"\\udc80": 1}]')) == ["\U0001f600", {"\ufffd": 1}]
