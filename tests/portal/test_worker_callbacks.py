"""Workers report status and results with the submission's secret; the reaper fails lost jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from portal.lib.reports import without_nul
from portal.submissions.models import Submission
from portal.submissions.lifecycle import reap_stuck

pytestmark = pytest.mark.django_db


def post(client: Any, sub: Submission, what: str, token: str, body: dict[str, Any]) -> Any:
    return client.post(f"/api/v1/worker/submissions/{sub.pk}/{what}/", body, format="json",
                       HTTP_AUTHORIZATION=f"Worker {token}")


def test_a_worker_moves_a_job_through_its_states(anonymous_api: Any, job: Any,
                                                 real_report: dict[str, Any]) -> None:
    sub, token = job
    assert post(anonymous_api, sub, "status", token, {"status": "compiling", "worker": "w1"}).status_code == 200
    assert post(anonymous_api, sub, "status", token, {"status": "running"}).status_code == 200
    r = post(anonymous_api, sub, "report", token, {"report": real_report, "worker": "w1"})
    assert r.status_code == 200, r.content
    sub.refresh_from_db()
    assert sub.status == "finished" and sub.verdict == "pass" and sub.worker == "w1"
    assert sub.speedup == pytest.approx(real_report["timing"]["speedup"])
    assert sub.started_at and sub.compiling_at and sub.running_at and sub.finished_at
    assert sub.report == real_report


def test_a_wrong_token_is_refused(anonymous_api: Any, job: Any, real_report: dict[str, Any]) -> None:
    sub, _ = job
    assert post(anonymous_api, sub, "report", "guess", {"report": real_report}).status_code == 403
    assert post(anonymous_api, sub, "status", "", {"status": "running"}).status_code == 403
    sub.refresh_from_db()
    assert sub.status == "queued"


def test_a_user_token_is_not_a_worker_token(owner_api: Any, job: Any, real_report: dict[str, Any]) -> None:
    sub, _ = job
    r = owner_api.post(f"/api/v1/worker/submissions/{sub.pk}/report/", {"report": real_report},
                       format="json")
    assert r.status_code == 403


def test_a_second_report_is_a_conflict(anonymous_api: Any, job: Any, real_report: dict[str, Any]) -> None:
    sub, token = job
    assert post(anonymous_api, sub, "report", token, {"report": real_report}).status_code == 200
    assert post(anonymous_api, sub, "report", token, {"report": real_report}).status_code == 409


def test_a_worker_error_fails_the_submission_with_its_reason(anonymous_api: Any, job: Any) -> None:
    sub, token = job
    r = post(anonymous_api, sub, "report", token, {"error": "evaluator exited with code 2",
                                                   "output": "Traceback: boom"})
    assert r.status_code == 200
    sub.refresh_from_db()
    assert sub.status == "failed" and "exited with code 2" in sub.status_reason
    assert "boom" in sub.status_reason


def test_a_malformed_report_is_refused(anonymous_api: Any, job: Any) -> None:
    sub, token = job
    assert post(anonymous_api, sub, "report", token, {"report": {"hello": 1}}).status_code == 400
    assert post(anonymous_api, sub, "report", token, {}).status_code == 400
    sub.refresh_from_db()
    assert sub.status == "queued"


def test_a_report_of_another_version_is_filed_under_it(anonymous_api: Any, job: Any,
                                                      real_report: dict[str, Any]) -> None:
    sub, token = job
    report = {**real_report, "problem": {**real_report["problem"], "version": "0123456789abcdef"}}
    post(anonymous_api, sub, "report", token, {"report": report})
    sub.refresh_from_db()
    assert sub.problem_version.version == "0123456789abcdef"
    assert not sub.problem_version.source_recorded and "version" in sub.status_reason


def test_the_reaper_fails_a_running_job_past_its_limit(job: Any, settings: Any) -> None:
    sub, _ = job
    settings.PKB_EVAL_TIMEOUT_S, settings.PKB_RUN_GRACE_S = 60, 10
    Submission.objects.filter(pk=sub.pk).update(
        status="running", worker="gpu-7", started_at=timezone.now() - timedelta(seconds=71))
    assert reap_stuck() == 1
    sub.refresh_from_db()
    assert sub.status == "failed" and "gpu-7 stopped reporting" in sub.status_reason


def test_the_reaper_leaves_a_job_within_its_limit(job: Any, settings: Any) -> None:
    sub, _ = job
    Submission.objects.filter(pk=sub.pk).update(status="running", started_at=timezone.now())
    assert reap_stuck() == 0


def test_the_reaper_fails_a_job_no_worker_took(job: Any, settings: Any) -> None:
    sub, _ = job
    settings.PKB_QUEUE_TIMEOUT_S = 5
    Submission.objects.filter(pk=sub.pk).update(created_at=timezone.now() - timedelta(seconds=6))
    assert reap_stuck() == 1
    sub.refresh_from_db()
    assert "No worker" in sub.status_reason


def test_reading_a_stuck_submission_says_it_is_overdue_and_writes_nothing(
        anonymous_api: Any, job: Any, settings: Any) -> None:
    sub, _ = job
    settings.PKB_QUEUE_TIMEOUT_S = 5
    Submission.objects.filter(pk=sub.pk).update(created_at=timezone.now() - timedelta(seconds=6))
    body = anonymous_api.get(f"/api/v1/submissions/{sub.pk}/").json()
    page = anonymous_api.get(f"/submissions/{sub.pk}/status.json").json()
    for seen in (body, page):
        assert seen["status"] == "queued" and seen["status_reason"].startswith("Overdue: No worker")
    sub.refresh_from_db()
    assert sub.status == "queued" and sub.status_reason == ""  # a GET changed nothing
    assert reap_stuck() == 1  # the reaper is what fails it
    sub.refresh_from_db()
    assert sub.status == "failed" and sub.status_reason.startswith("No worker")


def test_the_latest_step_shows_while_pending_and_clears_at_the_end(
        anonymous_api: Any, job: Any, real_report: dict[str, Any]) -> None:
    sub, token = job
    post(anonymous_api, sub, "status", token, {"status": "running", "step": "candidate: trial 2 of 5"})
    page = anonymous_api.get(f"/submissions/{sub.pk}/status.json").json()
    assert (page["status"], page["progress"]) == ("running", "candidate: trial 2 of 5")
    post(anonymous_api, sub, "status", token, {"status": "compiling", "step": "late"})
    sub.refresh_from_db()
    assert sub.status == "running"  # a late message never moves a job back
    post(anonymous_api, sub, "report", token, {"report": real_report})
    sub.refresh_from_db()
    assert sub.progress == ""


def test_a_report_that_breaks_the_schema_is_refused_and_the_job_stays_open(
        anonymous_api: Any, job: Any, real_report: dict[str, Any]) -> None:
    sub, token = job
    broken = {**real_report, "trials": "all of them"}
    response = post(anonymous_api, sub, "report", token, {"report": broken})
    assert response.status_code == 400
    assert "report schema" in str(response.json()) and "trials" in str(response.json())
    sub.refresh_from_db()
    assert sub.is_pending and sub.report is None  # nothing half-stored; a correct report may follow
    assert post(anonymous_api, sub, "report", token, {"report": real_report}).status_code == 200


def test_nul_characters_a_candidate_printed_are_stored_replaced_not_refused_by_postgres(
        anonymous_api: Any, job: Any, real_report: dict[str, Any]) -> None:
    # A candidate's own text reaches the report (its exception, its stderr, the steps it names),
    # and PostgreSQL's jsonb and text refuse U+0000: stored as is, the report's save failed and the
    # job never got its verdict.
    sub, token = job
    report = dict(real_report, verdict="fail", timing=None,
                  failure={"failure_class": "runtime_error", "message": "rank 0: RuntimeError: a\x00b",
                           "rank": 0, "trial": 0, "output": None, "traceback": "line\x00",
                           "compiler_output": None, "stacks": {}, "stderr": {"0": "printed \x00"}})
    assert post(anonymous_api, sub, "status", token, {"status": "running", "step": "trial\x00 1"}).status_code == 200
    sub.refresh_from_db()
    assert "\x00" not in sub.progress
    r = post(anonymous_api, sub, "report", token, {"report": report, "worker": "w1"})
    assert r.status_code == 200, r.content
    sub.refresh_from_db()
    assert sub.status == "finished" and sub.verdict == "fail" and sub.failure_class == "runtime_error"
    assert sub.report["failure"]["message"] == "rank 0: RuntimeError: a\ufffdb"
    assert without_nul({"k\x00": ["\x00", 1, None]}) == {"k\ufffd": ["\ufffd", 1, None]}  # keys too
