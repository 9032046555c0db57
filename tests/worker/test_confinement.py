"""A worker runs strangers' code only confined, unless its operator explicitly says otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.job import EvalJob
from worker import confinement
from worker.config import WorkerConfig


def test_a_worker_where_the_sandbox_works_adds_no_flag(monkeypatch):
    monkeypatch.setattr(confinement, "unavailable_reason", lambda: None)
    assert confinement.sandbox_flags(WorkerConfig()) == []


def test_a_worker_that_cannot_confine_refuses_jobs(monkeypatch):
    monkeypatch.setattr(confinement, "unavailable_reason", lambda: "no user namespaces")
    monkeypatch.delenv("PKB_WORKER_ALLOW_UNSANDBOXED", raising=False)
    with pytest.raises(confinement.SandboxUnavailable, match="no user namespaces.*PKB_WORKER_ALLOW_UNSANDBOXED=1"):
        confinement.sandbox_flags(WorkerConfig())


def test_an_operator_override_runs_unconfined_and_says_so(monkeypatch, caplog):
    monkeypatch.setattr(confinement, "unavailable_reason", lambda: "no user namespaces")
    monkeypatch.setenv("PKB_WORKER_ALLOW_UNSANDBOXED", "1")
    assert confinement.sandbox_flags(WorkerConfig()) == ["--no-sandbox"]
    assert "WITHOUT the sandbox" in caplog.text


def test_the_flag_reaches_the_evaluator_command_line():
    job = EvalJob(submission_id=1, problem="all-reduce", problem_version="v", source="", world_size=2,
                  device="cpu", size="small", dtype=None, trials=1, hardware_profile=None, timeout_s=900,
                  callback_url="http://portal/api/v1/worker/submissions/1/", token="t")
    command = job.command(["pkb"], Path("s.py"), 9, 900, ("--no-sandbox",))
    assert command[-1] == "--no-sandbox" and command[:2] == ["pkb", "eval"]


def test_a_refused_job_is_reported_to_the_portal_not_run(monkeypatch):
    from worker import tasks

    monkeypatch.setattr(confinement, "unavailable_reason", lambda: "no user namespaces")
    monkeypatch.delenv("PKB_WORKER_ALLOW_UNSANDBOXED", raising=False)
    posted = []
    monkeypatch.setattr(tasks.callback, "post", lambda url, token, payload, retries: posted.append((url, payload)))
    monkeypatch.setattr(tasks.runner, "run", lambda *a, **k: pytest.fail("a refused job must not run"))
    job = EvalJob(submission_id=7, problem="all-reduce", problem_version="v", source="", world_size=2,
                  device="cpu", size="small", dtype=None, trials=1, hardware_profile=None, timeout_s=900,
                  callback_url="http://portal/api/v1/worker/submissions/7/", token="t")
    assert tasks.evaluate_job(job.to_payload(), WorkerConfig()) == "refused"
    assert posted[-1][0].endswith("/7/report/")
    assert "refused the job" in posted[-1][1]["error"] and "no user namespaces" in posted[-1][1]["error"]


# The portal's Django fixup also listens, and warns when the signal comes without a worker.
@pytest.mark.filterwarnings("ignore::celery.fixups.django.FixupWarning")
def test_a_worker_that_cannot_confine_does_not_start(monkeypatch, capsys):
    from celery.signals import worker_init

    from worker import tasks

    monkeypatch.setattr(confinement, "unavailable_reason", lambda: "no user namespaces")
    monkeypatch.delenv("PKB_WORKER_ALLOW_UNSANDBOXED", raising=False)
    # Sent the way Celery sends it: an ordinary exception would be logged and the worker go on.
    with pytest.raises(SystemExit) as stopped:
        worker_init.send(sender=None)
    assert stopped.value.code == 2 and tasks.refuse_to_start_unconfined is not None
    assert "cannot confine candidate code (no user namespaces)" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::celery.fixups.django.FixupWarning")
def test_an_operator_override_lets_the_worker_start(monkeypatch):
    from celery.signals import worker_init

    import worker.tasks  # noqa: F401  (connects the handler)

    monkeypatch.setattr(confinement, "unavailable_reason", lambda: "no user namespaces")
    monkeypatch.setenv("PKB_WORKER_ALLOW_UNSANDBOXED", "1")
    assert all(not isinstance(answer, BaseException) for _, answer in worker_init.send(sender=None))
