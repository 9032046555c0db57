"""A worker dies mid-evaluation; the portal is down when a worker finishes."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from portal.lib import stack
from portal.submissions.models import Submission
from ..conftest import VALID_SOURCE

from .conftest import CANDIDATES, start_worker
from .services import WEB_PORTS, Proc, alive, descendants, http, production_env, running, wait_until

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(300)]


def test_a_worker_killed_mid_evaluation_is_redelivered_with_one_result(
        tmp_path: Path, private_redis: Any, submit_to: Any, cpu_hardware: Any,
        all_reduce: Any, live_server: Any) -> None:
    sub = submit_to(private_redis.url, cpu_hardware, (CANDIDATES / "slow_import.py").read_text())
    # Redelivery waits for the visibility timeout: short here, longer than this evaluation.
    fast_redelivery = {"PKB_WORKER_VISIBILITY_TIMEOUT_S": "60"}
    first = start_worker(tmp_path, cpu_hardware.queue, private_redis.url, live_server.url,
                         "doomed", **fast_redelivery)
    with running(first):
        def mid_run() -> dict[int, str]:
            sub.refresh_from_db()
            tree = descendants(first.pid)
            # worker, its pool child, pkb eval, and the candidate's sandbox under it. The reference
            # starts only once the candidate stands frozen after its start-up, so while the
            # candidate sleeps in its import no side has said anything a person would see, and
            # pkb eval prints nothing until that import ends (the sandbox's processes are there,
            # the progress is still the worker's own): a SIGPIPE would not end it, only dying with
            # its worker does.
            silent = sub.progress == "starting the evaluator"  # the worker's word until a side says more
            return tree if silent and len(tree) >= 5 else {}

        tree = wait_until(mid_run, 120, "the evaluation under way")
        first.kill(signal.SIGKILL)
        # pkb eval dies with the worker (PDEATHSIG), the sandbox's ranks with pkb eval: at once,
        # while the candidate still sleeps in its import (without it, they outlive the worker)
        wait_until(lambda: not alive(tree), 4, f"every process of the run gone ({tree})")

    second = start_worker(tmp_path, cpu_hardware.queue, private_redis.url, live_server.url,
                          "survivor", **fast_redelivery)
    with running(second):
        wait_until(lambda: Submission.objects.get(pk=sub.pk).status in ("finished", "failed"),
                   200, "the redelivered job finished")
    sub.refresh_from_db()
    assert sub.status == "finished", (sub.status_reason, second.tail())
    assert sub.verdict == "pass" and sub.worker == "survivor" and not sub.token_hash
    assert Submission.objects.filter(model=sub.model, problem_version=sub.problem_version).count() == 1
    assert private_redis.queued(cpu_hardware.queue) == 0
    assert private_redis.client().hlen("unacked") == 0


def test_the_portal_down_at_the_end_keeps_the_report_until_it_is_back(
        tmp_path: Path, private_redis: Any, submit_to: Any, cpu_hardware: Any, all_reduce: Any,
        test_database_url: str) -> None:
    port = WEB_PORTS[1]
    portal = f"http://127.0.0.1:{port}"
    sub = submit_to(private_redis.url, cpu_hardware, VALID_SOURCE)
    spool = tmp_path / "spool-patient"
    worker = start_worker(tmp_path, cpu_hardware.queue, private_redis.url, portal, "patient")
    with running(worker):
        kept = wait_until(lambda: list(spool.glob("*.json")), 150, "the report kept on disk")
        copy = json.loads(kept[0].read_text())
        assert "report" in copy["payload"] and copy["url"].startswith(portal)
        wait_until(lambda: "retrying in" in worker.tail(20000), 20, "the worker retrying")
        sub.refresh_from_db()
        assert sub.status == "queued"  # the portal has heard nothing yet
        web = Proc(stack.gunicorn(f"127.0.0.1:{port}", workers=1, threads=4,
                                  settings="portal.settings.production",
                                  env=production_env(test_database_url, private_redis.url)),
                   tmp_path / "web.log")
        with running(web):
            wait_until(lambda: Submission.objects.get(pk=sub.pk).status == "finished", 90,
                       "the kept report accepted once the portal is back")
            wait_until(lambda: not list(spool.glob("*.json")), 10, "the spool emptied")
            sub.refresh_from_db()
            stored_at = sub.finished_at
            # The same report again (a worker that never heard the answer): stored once.
            code, _, body = http("POST", copy["url"], json.dumps(copy["payload"]).encode(),
                                 {"Content-Type": "application/json",
                                  "Authorization": f"Worker {copy['token']}"})
            assert code == 409, body
    sub.refresh_from_db()
    assert sub.status == "finished" and sub.verdict == "pass" and sub.finished_at == stored_at
    assert "portal unreachable, retrying" in worker.tail(50000)
