"""Fault tests: real gunicorn, Celery workers, Redis and PostgreSQL processes, some of them
killed on purpose. Servers that get stopped are private ones on their own ports."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from celery import Celery
from django.db import connection

from contract.job import TASK_NAME
from portal.lib import stack
from portal.submissions import services
from portal.submissions.models import Submission

from .services import PrivateRedis, Proc

CANDIDATES = Path(__file__).parent / "candidates"


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path / "redis-data")
    server.directory.mkdir()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def test_database_url(transactional_db: None) -> str:
    """The test database as other processes reach it (its rows are committed: transactional)."""
    s = connection.settings_dict
    return f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def queue_job(sub: Submission, token: str, broker_url: str) -> None:
    """What ``services.dispatch`` sends, sent to ``broker_url`` (a private Redis)."""
    app = Celery("fault-test", broker=broker_url)
    try:
        result = app.send_task(TASK_NAME, kwargs={"job": services.task_payload(sub, token)},
                               queue=services.queue_for(sub))
    finally:
        app.close()
    Submission.objects.filter(pk=sub.pk).update(task_id=result.id)


@pytest.fixture
def submit_to(monkeypatch: pytest.MonkeyPatch, owner: Any) -> Any:
    """submit_to(broker_url, problem, hardware, source) -> Submission, queued on that broker."""
    sent: list[tuple[int, str]] = []
    monkeypatch.setattr(services, "dispatch", lambda pk, token: sent.append((pk, token)))

    def submit(broker_url: str, hardware: Any, source: str, model: str = "fault-model") -> Submission:
        sub = services.submit(user=owner, problem="all-reduce", hardware=hardware.slug,
                              backend="torch", model=model, source=source.encode(), origin="api")
        pk, token = sent.pop()
        assert pk == sub.pk
        queue_job(sub, token, broker_url)
        return Submission.objects.get(pk=pk)

    return submit


def start_worker(tmp_path: Path, queue: str, broker_url: str, portal_url: str, name: str,
                 **env: str) -> Proc:
    spec = stack.evaluation_worker(queue, broker_url=broker_url, portal_url=portal_url, name=name,
                                   env={"PKB_WORKER_SPOOL_DIR": str(tmp_path / f"spool-{name}"),
                                        "PKB_WORKER_RETRY_MAX_S": "1", **env})
    return Proc(spec, tmp_path / f"{name}.log")
