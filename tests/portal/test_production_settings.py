"""The production settings as shipped: `manage.py check --deploy` finds nothing, and a missing or
weak secret stops the start instead of falling back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
ENV = {"DJANGO_SETTINGS_MODULE": "portal.settings.production",
       "PKB_SECRET_KEY": "deploy-check-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFG",
       "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/unused",
       "PKB_BROKER_URL": "redis://127.0.0.1:6379/12"}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PKB_", "DJANGO_"))}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, capture_output=True,
                           text=True, timeout=120, env={**environ, **ENV, **env})


@pytest.mark.parametrize("https", ["1", "0"], ids=["behind TLS (default)", "PKB_HTTPS=0"])
def test_check_deploy_is_clean(https: str) -> None:
    done = manage("check", "--deploy", "--fail-level", "WARNING", PKB_HTTPS=https)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


@pytest.mark.parametrize("env, says", [
    ({"PKB_SECRET_KEY": ""}, "PKB_SECRET_KEY must be set"),
    ({"PKB_SECRET_KEY": "short"}, "at least 50 characters"),
    ({"DATABASE_URL": ""}, "DATABASE_URL must be set"),
])
def test_a_missing_or_weak_setting_stops_the_start(env: dict[str, str], says: str) -> None:
    done = manage("check", **env)
    assert done.returncode != 0 and says in done.stderr


def test_production_mode_refuses_a_development_configuration() -> None:
    done = subprocess.run([sys.executable, "manage.py", "pkb_up", "--production"], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.local",
                               "DATABASE_URL": "sqlite:////tmp/pkb-not-production.sqlite3"})
    assert done.returncode != 0 and "not a production configuration" in done.stderr
