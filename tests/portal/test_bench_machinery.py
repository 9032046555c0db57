"""The benchmark scripts run end to end on a small scale (their times are not checked here:
docs/load.md has the numbers and how they were measured)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

REPO = Path(__file__).resolve().parents[2]
# long: three benchmark scripts end to end (400 submissions seeded, every board timed, a load test
# through a live server), 17 s of a 2-core host's make test; they are tools beside the site, whose
# pages and API make test checks on their own (tests/portal).
pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.long]


def run(script: str, *args: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, f"scripts/bench/{script}", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_populate_boards_and_load_run(transactional_db: None, live_server: Any) -> None:
    s = connection.settings_dict
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test",
           "DATABASE_URL": f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:"
                           f"{s['PORT'] or 5432}/{s['NAME']}"}
    out = run("populate.py", "--submissions", "400", "--models", "3", env=env)
    assert "400 submissions" in out
    from portal.submissions.models import Submission

    assert Submission.objects.filter(status="finished", model__name__startswith="bench-model-").count() == 400

    out = run("boards.py", "--repeat", "3", "--cold", "1", env=env)
    assert "commit:" in out and "load average" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "ms" not in line]
    assert len(rows) == 6, out  # every board answered 200 (the script asserts it) and was timed

    out = run("load.py", "--url", live_server.url, "--clients", "4", "--writers", "1",
              "--seconds", "4", "--submit-rate", "60/min", env=env)
    assert "0 errors" in out and "| model leaderboard |" in out
    assert Submission.objects.filter(model__name="load-test").exists()  # the writer uploaded
    import redis
    from django.conf import settings

    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("pkb.hw.h200-x4-nvlink")
