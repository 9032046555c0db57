"""`make up` prints each request's log line once: a 404 or a 503 is one line, not two or three."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_runserver_logs_each_refused_request_once(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.local",
           "PKB_VAR_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    env.pop("DATABASE_URL", None)  # nothing here touches a database
    server = subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}",
                               "--noreload"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.3)
        for path in ("/no-such-page/", "/api/v1/no-such-endpoint/"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)
            assert refused.value.code == 404
        time.sleep(0.5)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        output, _ = server.communicate(timeout=15)
    for path in ("/no-such-page/", "/api/v1/no-such-endpoint/"):
        lines = [line for line in output.splitlines() if path in line]
        assert len(lines) == 1, (path, lines)
        assert '" 404 ' in lines[0]
