"""Throwaway Redis and PostgreSQL servers and the portal's own processes, for fault tests.

The machine's shared PostgreSQL (5432) and Redis (6379) are never restarted: a test that needs
to stop or kill one starts its own on a private port in a temporary directory, with the
settings production uses, and removes it afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from evaluator.sandbox import libc
from portal.lib.stack import ProcessSpec

from ..conftest import wait_for

REPO = Path(__file__).resolve().parents[3]


def _worker_index() -> int:
    """Which pytest-xdist worker this is (gw0, gw1, ...; 0 without -n): each takes its own ports."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") else 0


# Fixed, below the range the kernel hands out to outgoing connections (a port waited for while
# nothing listens there stays free), and ten apart per worker so that two can run at once.
_OFFSET = 10 * _worker_index()
REDIS_PORT, POSTGRES_PORT = 6391 + _OFFSET, 5491 + _OFFSET
WEB_PORTS = (8111 + _OFFSET, 8112 + _OFFSET, 8113 + _OFFSET)


def wait_until(predicate: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.2) -> Any:
    return wait_for(predicate, timeout_s, every_s, what)


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


class Proc:
    """A child in its own process group, so that it and everything it started can be killed."""

    def __init__(self, spec: ProcessSpec, log: Path, cwd: Path = REPO) -> None:
        self.spec, self.log = spec, log
        self.popen = subprocess.Popen(spec.argv, env=spec.environ(), cwd=cwd,
                                      stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                                      start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def kill(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.kill(signal.SIGTERM)
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        self.kill(signal.SIGKILL)
        self.popen.wait(timeout=10)

    def tail(self, n: int = 4000) -> str:
        return self.log.read_bytes()[-n:].decode(errors="replace") if self.log.exists() else ""


# --- Redis ------------------------------------------------------------------------------------
# What the broker needs so that a restart (even a crash) loses no queued job: an append-only
# file, synced on every write. Jobs are few and small; the cost of "always" is not felt.
REDIS_PERSISTENCE = ["--appendonly", "yes", "--appendfsync", "always"]
REDIS_VOLATILE = ["--appendonly", "no", "--save", ""]


class PrivateRedis:
    def __init__(self, directory: Path, port: int = REDIS_PORT, persistent: bool = True) -> None:
        self.directory, self.port = directory, port
        self.args = REDIS_PERSISTENCE if persistent else REDIS_VOLATILE
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert not port_open(self.port), (
            f"port {self.port} is taken: if it is a private Redis left by a killed test run, "
            f"`redis-cli -p {self.port} shutdown nosave` frees it")
        # Dies with the test process: a killed `make test-long` left one holding the port, and
        # the next run's fault tests failed on it (2026-11-28, twice).
        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.port), "--bind",
             "127.0.0.1", "--dir", str(self.directory), *self.args,
             "--logfile", str(self.directory / "redis.log")], start_new_session=True,
            preexec_fn=libc.dies_with(os.getpid()))
        wait_until(self.ping, 10, "private redis answering")

    def crash(self) -> None:
        """SIGKILL: no chance to save, the harshest restart."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=10)
        wait_until(lambda: not port_open(self.port), 10, "private redis gone")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.crash()

    def client(self):  # type: ignore[no-untyped-def]
        import redis

        return redis.Redis(port=self.port, socket_connect_timeout=1)

    def ping(self) -> bool:
        import redis

        try:
            return bool(self.client().ping())
        except redis.ConnectionError:
            return False

    def queued(self, queue: str) -> int:
        return int(self.client().llen(queue))


# --- PostgreSQL -------------------------------------------------------------------------------
def pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    assert path, f"{name} not found (PostgreSQL server binaries)"
    return path


class PrivatePostgres:
    """A cluster of its own; as root it runs as the postgres user (initdb refuses root), in a
    directory of its own under /tmp (pytest's are private to root)."""

    def __init__(self, port: int = POSTGRES_PORT) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="pkb-fault-pg-"))
        self.port = port
        self.data = self.directory / "data"

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/pkb"

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        done = subprocess.run([*prefix, *argv], capture_output=True, timeout=120)
        assert done.returncode == 0, f"{argv[0]}: {done.stderr.decode(errors='replace')[-2000:]}"

    def init(self) -> None:
        assert not port_open(self.port), f"port {self.port} is taken"
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        self._run(pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--no-sync", "-E", "UTF8")
        self.start()
        self._run(pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "pkb")

    def start(self) -> None:
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-w", "-t", "30", "-l",
                  str(self.directory / "pg.log"), "-o",
                  f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off",
                  "start")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-w", "-m", "fast", "stop")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


# --- HTTP -------------------------------------------------------------------------------------
def http(method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None,
         timeout_s: float = 10) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()
    except (urllib.error.URLError, OSError) as exc:  # not listening (yet, or any more)
        return 0, {}, str(exc).encode()


def production_env(database_url: str, broker_url: str, **extra: str) -> dict[str, str]:
    return {"DJANGO_SETTINGS_MODULE": "portal.settings.production", "DATABASE_URL": database_url,
            "PKB_BROKER_URL": broker_url, "PKB_SECRET_KEY": "fault-tests-" + "k" * 40 + "-x1y2z3",
            "PKB_HTTPS": "0", **extra}


@contextmanager
def running(proc: Proc) -> Iterator[Proc]:
    try:
        yield proc
    finally:
        proc.stop()


def descendants(root: int) -> dict[int, str]:
    """Every live process below ``root`` (pid -> start time, to tell a reused pid apart)."""
    parents: dict[int, list[int]] = {}
    starts: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        parents.setdefault(int(fields[1]), []).append(int(entry))
        starts[int(entry)] = fields[19]
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def alive(pids: dict[int, str]) -> list[int]:
    """Those of ``pids`` still running (zombies count as gone: they hold no resources)."""
    left = []
    for pid, start in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[19] == start and fields[0] != "Z":
            left.append(pid)
    return left
