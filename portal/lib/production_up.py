"""``pkb_up --production``: the production stack on one machine.

PostgreSQL and Redis are the machine's own (the settings name them); this creates the database
if it is missing, migrates, collects static files for whitenoise, seeds, runs ``check
--deploy``, then starts and watches gunicorn, one evaluation worker per CPU hardware queue and
the reaper (Celery beat inside the portal's worker). Ctrl-C or SIGTERM stops them all.
"""

from __future__ import annotations

import subprocess
from io import StringIO
from typing import Callable

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from portal.catalog.models import Hardware

from . import stack


def check_settings() -> None:
    """Refuse to call SQLite or a filesystem broker "production"."""
    problems = []
    if settings.DEBUG:
        problems.append("DEBUG is on")
    if connection.vendor != "postgresql":
        problems.append(f"the database is {connection.vendor}, not PostgreSQL (DATABASE_URL)")
    if not str(settings.CELERY_BROKER_URL).startswith(("redis://", "rediss://")):
        problems.append("the broker is not Redis (PKB_BROKER_URL)")
    if problems:
        raise CommandError("not a production configuration: " + "; ".join(problems) + ". Run it "
                           "as `make prod` or with DJANGO_SETTINGS_MODULE=portal.settings.production.")


def ensure_database() -> None:
    """CREATE DATABASE when the configured one does not exist yet (a fresh machine)."""
    import psycopg

    db = settings.DATABASES["default"]
    params = {"host": db.get("HOST") or None, "port": db.get("PORT") or None,
              "user": db.get("USER") or None, "password": db.get("PASSWORD") or None}
    try:
        psycopg.connect(dbname=db["NAME"], connect_timeout=5, **params).close()
        return
    except psycopg.OperationalError as exc:
        if "does not exist" not in str(exc):
            raise CommandError(f"PostgreSQL is not reachable: {exc}") from None
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
        admin.execute(f'CREATE DATABASE "{db["NAME"]}"')


def deploy_check() -> str:
    out = StringIO()
    call_command("check", deploy=True, fail_level="WARNING", stdout=out, stderr=out)
    return out.getvalue().strip()


def worker_hardware() -> list[Hardware]:
    return list(Hardware.objects.active().filter(kind="cpu").order_by("builtin", "slug"))


def specs(host: str, port: int) -> list[stack.ProcessSpec]:
    base = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    broker = settings.CELERY_BROKER_URL
    module = settings.SETTINGS_MODULE
    procs = [stack.gunicorn(f"{host}:{port}", settings=module)]
    for hw in worker_hardware():
        procs.append(stack.evaluation_worker(hw.queue, broker_url=broker, portal_url=base,
                                             name=f"cpu-{hw.slug}"))
    procs.append(stack.reaper(broker_url=broker, settings=module,
                              schedule_file=settings.VAR_DIR / "celerybeat-schedule"))
    return procs


def run(specs_: list[stack.ProcessSpec], say: Callable[[str], None]) -> None:
    children: list[subprocess.Popen[bytes]] = []
    for spec in specs_:
        say(f"starting {spec.name}: {' '.join(spec.argv[2:6])} ...")
        children.append(subprocess.Popen(spec.argv, env=spec.environ(), cwd=settings.BASE_DIR))
    stack.supervise(children, [spec.name for spec in specs_], say)
