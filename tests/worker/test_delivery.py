"""Getting a result to the portal (worker/delivery.py) when the portal answers, but with an error:
a 500 to this very body is not an outage to wait out for hours."""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from worker import delivery
from worker.config import WorkerConfig


@pytest.fixture
def portal() -> Iterator[dict[str, Any]]:
    """A local HTTP server that answers every POST with ``state["status"]``, counting them."""
    state: dict[str, Any] = {"status": 500, "posts": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state["posts"] += 1
            self.send_response(state["status"])
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"code": "server_error"}}')

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() waits for the server's next poll: 0.5 s by default, every test that uses it
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/api/v1/worker/submissions/7/report/"
    yield state
    server.shutdown()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """delivery's clock, advanced by its sleeps: the seconds a delivery would wait, waited at once.
    Returns the waits."""
    now, waited = [time.monotonic()], []

    def sleep(seconds: float) -> None:
        waited.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(delivery, "time", type("FakeTime", (), {
        "monotonic": staticmethod(lambda: now[0]), "time_ns": staticmethod(time.time_ns),
        "sleep": staticmethod(sleep)}))
    return waited


def test_a_result_the_portal_fails_on_waits_in_the_spool_and_frees_the_worker(
        portal: dict[str, Any], clock: list[float], tmp_path: Path) -> None:
    # A report PostgreSQL could not store (a candidate's lone surrogate) was a 500, and the
    # worker posted it again with backoff for PKB_WORKER_DELIVERY_MAX_S, 6 hours, while its
    # queue waited (cut short only by the task's hard limit, 92 minutes by default).
    config = WorkerConfig(spool_dir=str(tmp_path / "spool"), delivery_max_s=6 * 3600, retry_max_s=60.0)
    outcome = delivery.deliver(7, portal["url"], "secret", {"report": {"verdict": "fail"}}, config)
    assert outcome == "kept" and portal["posts"] == 5
    assert sum(clock) < 60  # seconds the worker waited before taking its next job
    assert len(delivery.Spool(config.spool_dir).pending()) == 1  # a restarted worker posts it again


def test_an_outage_is_still_waited_out(portal: dict[str, Any], clock: list[float], tmp_path: Path) -> None:
    # 503 is what the portal answers while its database is away: waited out for as long as before.
    portal["status"] = 503
    config = WorkerConfig(spool_dir=str(tmp_path / "spool"), delivery_max_s=120, retry_max_s=8.0)
    assert delivery.deliver(7, portal["url"], "secret", {"report": {}}, config) == "kept"
    assert portal["posts"] > 5 and clock[:4] == [1.0, 2.0, 4.0, 8.0] and sum(clock) > 100
