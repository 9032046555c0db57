"""A real Celery worker on Redis evaluates a submission with the evaluator, on CPU over gloo."""

from __future__ import annotations

from typing import Any

import pytest

from portal.submissions.models import Submission
from worker.app import make_app
from worker.config import WorkerConfig

from .conftest import VALID_SOURCE, wait_for

pytestmark = [pytest.mark.services, pytest.mark.slow]

WRONG_SOURCE = VALID_SOURCE.replace("return out", "return out * 2")


@pytest.mark.django_db(transaction=True)
def test_a_submission_is_evaluated_end_to_end(celery_worker_process: Any, owner_api: Any,
                                              all_reduce: Any, cpu_hardware: Any) -> None:
    good = owner_api.post("/api/v1/submissions/", {
        "problem": "all-reduce", "hardware": cpu_hardware.slug, "model": "e2e-model",
        "source": VALID_SOURCE}, format="json")
    bad = owner_api.post("/api/v1/submissions/", {
        "problem": "all-reduce", "hardware": cpu_hardware.slug, "model": "e2e-model",
        "source": WRONG_SOURCE}, format="json")
    assert good.status_code == bad.status_code == 201

    def done() -> bool:
        return not Submission.objects.pending().exists()

    wait_for(done, timeout_s=180)
    ok, wrong = Submission.objects.get(pk=good.json()["id"]), Submission.objects.get(pk=bad.json()["id"])
    assert ok.status == "finished", ok.status_reason
    assert ok.verdict == "pass" and ok.speedup and ok.worker == "test-worker"
    assert ok.report["problem"]["version"] == ok.problem_version.version
    assert ok.started_at and ok.finished_at and not ok.token_hash
    assert wrong.status == "finished" and wrong.verdict == "fail"
    assert wrong.failure_class == "value_mismatch"
    body = owner_api.get("/api/v1/leaderboards/models/", {"hardware": cpu_hardware.slug}).json()
    row = next(r for r in body["models"] if r["model"] == "e2e-model")
    assert row["correct"] == 1 and row["attempts"] == 2 and row["pass_at_1"] == pytest.approx(0.5)


def test_the_worker_acks_late_with_prefetch_one() -> None:
    conf = make_app(WorkerConfig(broker_url="redis://127.0.0.1:6379/15")).conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    assert conf.broker_transport_options["visibility_timeout"] > conf.task_time_limit


def test_the_worker_package_does_not_import_django() -> None:
    import subprocess
    import sys

    # As on a GPU host without Django installed: make it unimportable (kombu probes for it).
    code = ("import sys; sys.modules['django'] = None; import worker, worker.tasks; "
            "print(any(m.startswith(('django', 'portal')) for m in sys.modules if sys.modules[m]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PKB_BROKER_URL": "redis://127.0.0.1:6379/15"},
                         cwd=str(__import__("pathlib").Path(__file__).parents[2]), check=True)
    assert out.stdout.strip() == "False"
