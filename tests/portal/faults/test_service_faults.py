"""Redis and PostgreSQL restart under the portal; the reaper; a web process killed mid-upload.

Each server that is stopped here is a private one (services.py), never the machine's own."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.authtoken.models import Token

from portal.lib import stack
from portal.submissions import services
from portal.submissions.models import AIModel, Submission

from ..conftest import VALID_SOURCE
from .conftest import queue_job, start_worker
from .services import (REPO, WEB_PORTS, PrivatePostgres, PrivateRedis, Proc, http, port_open,
                       production_env, running, wait_until)

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.mark.long
def test_a_redis_crash_loses_no_queued_job(tmp_path: Path, private_redis: PrivateRedis,
                                           submit_to: Any, cpu_hardware: Any, all_reduce: Any,
                                           live_server: Any) -> None:
    subs = [submit_to(private_redis.url, cpu_hardware, VALID_SOURCE) for _ in range(2)]
    assert private_redis.queued(cpu_hardware.queue) == 2
    private_redis.crash()  # SIGKILL: what survives is what the append-only file had synced
    private_redis.start()
    assert private_redis.queued(cpu_hardware.queue) == 2
    worker = start_worker(tmp_path, cpu_hardware.queue, private_redis.url, live_server.url, "after-restart")
    with running(worker):
        wait_until(lambda: not Submission.objects.pending().exists(), 200, "both jobs finished")
    assert {s.status for s in Submission.objects.filter(pk__in=[s.pk for s in subs])} == {"finished"}


def test_without_the_append_only_file_a_crash_loses_the_queue(tmp_path: Path) -> None:
    """The control: the setting is what keeps the jobs, not luck."""
    volatile = PrivateRedis(tmp_path, persistent=False)
    volatile.start()
    try:
        volatile.client().rpush("pkb.hw.example", b"job")
        volatile.crash()
        volatile.start()
        assert volatile.queued("pkb.hw.example") == 0
    finally:
        volatile.stop()


@pytest.fixture
def private_postgres() -> Any:
    server = PrivatePostgres()
    try:
        server.init()
        yield server
    finally:
        server.remove()


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory: Any) -> Path:
    """The manifest storage of production needs collectstatic once."""
    root = tmp_path_factory.mktemp("static")
    env = {**production_env("sqlite:////tmp/unused.sqlite3", "redis://127.0.0.1:1/0"),
           "PKB_STATIC_ROOT": str(root)}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=REPO,
                   env={**__import__("os").environ, **env}, check=True, timeout=120)
    return root


@pytest.mark.long
def test_a_postgres_restart_answers_503_then_recovers(tmp_path: Path, private_postgres: PrivatePostgres,
                                                     collected_static: Path) -> None:
    broker = settings.CELERY_BROKER_URL  # this session's own Redis database (cache, throttles)
    env = production_env(private_postgres.url, broker, PKB_STATIC_ROOT=str(collected_static))
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=REPO,
                   env={**__import__("os").environ, **env}, check=True, timeout=180)
    port = WEB_PORTS[2]
    base = f"http://127.0.0.1:{port}"
    web = Proc(stack.gunicorn(f"127.0.0.1:{port}", workers=1, threads=4,
                              settings="portal.settings.production", env=env), tmp_path / "web.log")
    with running(web):
        wait_until(lambda: http("GET", f"{base}/api/v1/problems/")[0] == 200, 60, "the site up")
        assert http("GET", f"{base}/")[0] == 200
        private_postgres.stop()
        code, headers, body = http("GET", f"{base}/api/v1/problems/")
        assert code == 503, body[:500]
        error = json.loads(body)["error"]
        assert error["code"] == "service_unavailable" and "database" in error["message"]
        assert headers.get("Retry-After") == "10"
        code, headers, body = http("GET", f"{base}/leaderboard/", headers={"Accept": "text/html"})
        assert code == 503 and b"Back in a moment" in body and b"database" in body
        assert headers["Content-Type"].startswith("text/html")
        code, _, body = http("POST", f"{base}/api/v1/submissions/", b"{}",
                             {"Content-Type": "application/json", "Authorization": "Token x"})
        assert code == 503, body[:300]
        private_postgres.start()
        # No restart of the web process: its next requests reconnect by themselves.
        wait_until(lambda: http("GET", f"{base}/api/v1/problems/")[0] == 200, 20, "API back")
        assert http("GET", f"{base}/")[0] == 200


@pytest.mark.long
def test_the_reaper_fails_a_stuck_submission_and_the_user_sees_why(
        tmp_path: Path, no_dispatch: list[int], owner: Any, cpu_hardware: Any, all_reduce: Any,
        test_database_url: str, client: Any) -> None:
    sub = services.submit(user=owner, problem="all-reduce", hardware=cpu_hardware.slug,
                          backend="torch", model="stuck-model", source=VALID_SOURCE.encode())
    long_ago = timezone.now() - timedelta(seconds=settings.PKB_EVAL_TIMEOUT_S + settings.PKB_RUN_GRACE_S + 60)
    Submission.objects.filter(pk=sub.pk).update(status="running", started_at=long_ago,
                                                worker="gpu-host-7", task_id="lost-task")
    env = production_env(test_database_url, settings.CELERY_BROKER_URL, PKB_REAP_EVERY_S="1")
    reaper = Proc(stack.reaper(broker_url=settings.CELERY_BROKER_URL, settings="portal.settings.production",
                               schedule_file=tmp_path / "beat-schedule", env=env), tmp_path / "reaper.log")
    with running(reaper):
        wait_until(lambda: Submission.objects.get(pk=sub.pk).status == "failed", 60,
                   "the reaper failed it")
    sub.refresh_from_db()
    assert "gpu-host-7 stopped reporting" in sub.status_reason
    client.force_login(owner)
    page = client.get(f"/submissions/{sub.pk}/")
    assert page.status_code == 200 and "gpu-host-7 stopped reporting" in page.content.decode()
    api = client.get(f"/api/v1/submissions/{sub.pk}/").json()
    assert api["status"] == "failed" and "stopped reporting" in api["status_reason"]


def _multipart(fields: dict[str, str], source: bytes, boundary: str = "pkbfaultboundary") -> bytes:
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
             for k, v in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="source"; '
                 f'filename="solution.py"\r\nContent-Type: text/x-python\r\n\r\n'.encode() + source + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode()


@pytest.mark.long
def test_a_web_process_killed_during_an_upload_stores_and_queues_nothing(
        tmp_path: Path, private_redis: PrivateRedis, owner: Any, cpu_hardware: Any,
        all_reduce: Any, test_database_url: str) -> None:
    token = Token.objects.create(user=owner).key
    port = WEB_PORTS[0]
    web = Proc(stack.gunicorn(f"127.0.0.1:{port}", workers=1, threads=4,
                              settings="portal.settings.production",
                              env=production_env(test_database_url, private_redis.url)),
               tmp_path / "web.log")
    padding = b"\n# padding so that the body is still in flight when the server dies\n" * 1500
    body = _multipart({"problem": "all-reduce", "hardware": cpu_hardware.slug, "backend": "torch",
                       "model": "killed-upload"}, VALID_SOURCE.encode() + padding)
    with running(web):
        wait_until(lambda: http("GET", f"http://127.0.0.1:{port}/api/v1/hardware/")[0] == 200, 60,
                   "the site up")
        conn = socket.create_connection(("127.0.0.1", port), timeout=10)
        conn.sendall(f"POST /api/v1/submissions/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Authorization: Token {token}\r\nContent-Length: {len(body)}\r\n"
                     f"Content-Type: multipart/form-data; boundary=pkbfaultboundary\r\n\r\n".encode())
        conn.sendall(body[: len(body) // 2])
        time.sleep(1.0)  # the server is reading the body when it is killed
        web.kill()
        web.popen.wait(timeout=10)
        conn.close()
    assert not Submission.objects.exists()
    assert not AIModel.objects.filter(name="killed-upload").exists()
    assert not [k for k in private_redis.client().keys("*") if k.startswith(b"pkb.hw.")]


def test_a_dispatch_lost_between_commit_and_send_is_sent_again(
        monkeypatch: pytest.MonkeyPatch, private_redis: PrivateRedis, owner: Any,
        cpu_hardware: Any, all_reduce: Any, transactional_db: None) -> None:
    """The web process died after the commit, before the send: the reaper sends it, once, with a
    new secret (a first send that did happen after all holds a secret that no longer works)."""
    lost: list[tuple[int, str]] = []
    monkeypatch.setattr(services, "dispatch", lambda pk, token: lost.append((pk, token)))
    sub = services.submit(user=owner, problem="all-reduce", hardware=cpu_hardware.slug,
                          backend="torch", model="lost-dispatch", source=VALID_SOURCE.encode())
    (pk, old_token), = lost
    monkeypatch.setattr(services, "dispatch",
                        lambda pk, token: queue_job(Submission.objects.get(pk=pk), token, private_redis.url))
    assert services.redispatch_lost() == 0  # within the grace period: maybe still sending
    later = timezone.now() + timedelta(seconds=settings.PKB_DISPATCH_GRACE_S + 1)
    assert services.redispatch_lost(now=later) == 1
    assert services.redispatch_lost(now=later) == 0  # it has a task now
    sub.refresh_from_db()
    assert sub.task_id and not sub.token_matches(old_token)
    assert private_redis.queued(cpu_hardware.queue) == 1


def test_a_private_redis_dies_with_the_test_process_that_started_it(tmp_path: Path) -> None:
    """A killed test run must not leave its private Redis holding the port for the next run
    (2026-11-28: a killed `make test-long` did, and the next `make test` failed on it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = (f"import os, sys, time; sys.path[:0] = [{str(REPO)!r}]\n"
              "import django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'portal.settings.test'); django.setup()\n"
              "from pathlib import Path\n"
              "from tests.portal.faults.services import PrivateRedis\n"
              f"PrivateRedis(Path({str(tmp_path)!r}), port={port}, persistent=False).start()\n"
              "print('up', flush=True); time.sleep(600)\n")
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=REPO)
    try:
        assert runner.stdout is not None and runner.stdout.readline().strip() == b"up"
        assert port_open(port)
        runner.kill()
        runner.wait(timeout=10)
        wait_until(lambda: not port_open(port), 10, "the orphaned private redis gone")
    finally:
        runner.kill()
