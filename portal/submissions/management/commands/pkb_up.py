"""One command for one machine: migrate, seed, then run a CPU worker and the web server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.catalog.models import Hardware
from portal.lib import production_up, stack
from portal.submissions.importing import enqueue_baselines
from portal.submissions.tasks import reap_stuck

DEMO_USER, DEMO_PASSWORD = "demo", "demo-pkb-local"  # a local account; pkb_up is not production


def check_port_free(host: str, port: int) -> None:
    """Stop before anything starts (or any banner says the site is up) when the port is taken,
    most often by a `make up` still running in another terminal."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        # as runserver and gunicorn bind: connections of a stopped server still in TIME_WAIT
        # must not count as taken, only a socket that listens there now
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            reach = "127.0.0.1" if host in ("0.0.0.0", "::") else host
            raise CommandError(
                f"port {port} on {host} is taken ({exc.strerror}): another `make up` may be "
                f"running; http://{reach}:{port}/ shows what answers there. Stop it (Ctrl-C in its "
                f"terminal), or start this one on another port: `PKB_PORT={port + 1} make up` "
                f"(or `.venv/bin/python manage.py pkb_up --port {port + 1}`).") from None


class Command(BaseCommand):
    help = "Start everything on this machine: database, seeded data, a CPU worker, the site."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("PKB_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PKB_PORT", "8000")))
        parser.add_argument("--no-worker", action="store_true", help="site only")
        parser.add_argument("--baselines", action="store_true",
                            help="queue a real run of every problem's reference on the local CPU "
                                 "(a side queue: your uploads are not held up behind it)")
        parser.add_argument("--no-demo-user", action="store_true")
        parser.add_argument("--production", action="store_true",
                            help="gunicorn + whitenoise, PostgreSQL and Redis from the settings, a "
                                 "worker per CPU hardware queue, the reaper (make prod)")

    def handle(self, *args: Any, **options: Any) -> None:
        check_port_free(options["host"], options["port"])
        if options["production"]:
            return self._production(options)
        reach = "127.0.0.1" if options["host"] in ("0.0.0.0", "::") else options["host"]
        base = f"http://{reach}:{options['port']}"
        login = "" if options["no_demo_user"] else f"log in as {DEMO_USER} / {DEMO_PASSWORD} (local only)"
        self._banner(f"PKB Portal: starting on {base}/", login,
                     "migrating and seeding first (a minute on a fresh clone)")
        call_command("migrate", verbosity=0, interactive=False)
        call_command("seed")
        local = self._local_hardware()
        if not options["no_demo_user"]:
            self._demo_user()
        children = [self._server(options["host"], options["port"])]
        if not options["no_worker"] and local is not None:
            children.append(self._worker(local, base))
            if options["baselines"]:
                queued = enqueue_baselines(local)
                self.stdout.write(f"queued {len(queued)} reference runs on {local.slug}")
        threading.Thread(target=self._reaper, daemon=True).start()
        threading.Thread(target=self._announce, args=(reach, options["port"], base, login),
                         daemon=True).start()
        self._wait(children)

    def _production(self, options: dict[str, Any]) -> None:
        production_up.check_settings()
        production_up.ensure_database()
        self._banner(f"PKB Portal (production stack) on http://{options['host']}:{options['port']}/",
                     "migrating, collecting static files, seeding")
        call_command("migrate", verbosity=0, interactive=False)
        call_command("collectstatic", verbosity=0, interactive=False)
        call_command("seed")
        if not options["no_demo_user"]:
            self._demo_user()
        if not settings.SECURE_SSL_REDIRECT:
            self.stdout.write(self.style.WARNING(
                "PKB_HTTPS=0: no HTTPS redirect, HSTS or secure cookies (a host without TLS)"))
        self.stdout.write(f"check --deploy: {production_up.deploy_check()}")
        production_up.run(production_up.specs(options["host"], options["port"]), self.stdout.write)

    def _banner(self, *lines: str) -> None:
        shown = [line for line in lines if line]
        rule = "=" * max(len(line) for line in shown)
        self.stdout.write(self.style.SUCCESS("\n".join([rule, *shown, rule])))

    def _announce(self, host: str, port: int, base: str, login: str) -> None:
        """Say where the site is once it answers, after the server's and worker's own banners."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        else:  # never "is up" for a site that never answered
            self.stderr.write(f"nothing answers on {base}/ after 120 s: the server's own messages "
                              f"above say why (the site is not up)")
            return
        time.sleep(2)  # let Celery's start-up banner go by first
        self._banner(f"PKB Portal is up: {base}/", login, "Ctrl-C stops the site and the worker")

    def _local_hardware(self) -> Hardware | None:
        wanted = settings.PKB_LOCAL_HARDWARE
        cpu = Hardware.objects.active().filter(kind="cpu")
        return cpu.filter(slug=wanted).first() or cpu.order_by("builtin", "slug").first()

    def _demo_user(self) -> None:
        User = get_user_model()
        if not User.objects.filter(username=DEMO_USER).exists():
            User.objects.create_user(DEMO_USER, password=DEMO_PASSWORD)

    def _server(self, host: str, port: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "manage.py", "runserver", f"{host}:{port}",
                                 "--noreload"], cwd=settings.BASE_DIR)

    def _worker(self, hardware: Hardware, base: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PKB_BROKER_URL": settings.CELERY_BROKER_URL,
               "PKB_BROKER_DIR": str(settings.VAR_DIR / "broker"), "PKB_PORTAL_URL": base}
        queues = f"{hardware.queue},{hardware.queue}.baseline"
        self.stdout.write(f"worker on {queues}")
        return subprocess.Popen([sys.executable, "-m", "celery", "-A", "worker", "worker",
                                 "-Q", queues, "--concurrency", "1", "--prefetch-multiplier", "1",
                                 "-n", f"local-{hardware.slug}@%h", "--loglevel", "INFO"],
                                cwd=settings.BASE_DIR, env=env)

    def _reaper(self) -> None:
        while True:
            time.sleep(30)
            try:
                reap_stuck()
            except Exception as exc:  # the site keeps running; the next sweep retries
                self.stderr.write(f"reaper: {exc}")

    def _wait(self, children: list[subprocess.Popen[bytes]]) -> None:
        stack.supervise(children, ["server", "worker"][:len(children)], self.stdout.write, grace_s=10)
