"""Fixtures for the attack suite: run one hostile candidate, and look at the host from outside.

Every attack in ``attacks/`` is a candidate file with placeholders (``__MARKER__``, ``__PORT__``,
...) that a test fills with values of its own (a unique marker, the port of a socket it listens
on, the path of a file only the host has), so that runs are independent and the test knows what
to look for afterwards: a Redis key, a file, a process whose command line carries the marker, a
connection to its socket.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from evaluator.api import evaluate
from evaluator.config import EvalConfig, Limits, ResourceLimits
from evaluator.sandbox import unavailable_reason

ATTACKS = Path(__file__).resolve().parent / "attacks"
REPO = Path(__file__).resolve().parents[2]
HOST_HOME = Path(os.path.expanduser("~")).resolve()
# Short limits, as in tests/evaluator: an attack that stalls a side fails in seconds, not minutes.
LIMITS = Limits(startup_s=60.0, step_s=10.0, total_s=120.0)
PLACEHOLDER = re.compile(r"__[A-Z][A-Z0-9_]*__")
REDIS = ("127.0.0.1", 6379)
POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture(scope="session", autouse=True)
def _sandbox_available() -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"this host cannot confine a side: {reason}")


@dataclass(repr=False)
class Outcome:
    report: dict[str, Any]
    seconds: float
    path: Path  # the candidate as it ran, placeholders filled

    @property
    def verdict(self) -> str:
        return self.report["verdict"]

    @property
    def failure_class(self) -> Optional[str]:
        failure = self.report.get("failure")
        return failure["failure_class"] if failure else None

    @property
    def message(self) -> str:
        failure = self.report.get("failure")
        return failure["message"] if failure else ""

    @property
    def text(self) -> str:
        """The whole report as the portal would store it."""
        return json.dumps(self.report, default=str)

    def __repr__(self) -> str:  # what an assertion shows
        failure = self.report.get("failure") or {}
        stderr = failure.get("stderr") or {}
        tails = "\n".join(f"--- rank {rank} ---\n{tail[-1500:]}" for rank, tail in sorted(stderr.items()))
        return (f"verdict {self.verdict}, {self.failure_class}: {self.message}\n"
                f"sandbox {self.report.get('sandbox')}, {self.seconds:.1f} s\n{tails}")


@pytest.fixture
def marker() -> str:
    """Unique to the test: safe in file names, Redis keys, SQL identifiers and command lines."""
    return "pkbattack" + secrets.token_hex(8)


@pytest.fixture
def secret() -> str:
    return "pkb-secret-" + secrets.token_hex(16)


def run_attack(name: str, folder: Path, values: dict[str, Any], *, timing: bool = False,
               resources: Optional[ResourceLimits] = None, workdir: Optional[Path] = None) -> Outcome:
    """Fill the placeholders of ``attacks/<name>.py`` with ``values``, write it to ``folder`` and
    evaluate it: all-reduce, CPU, 2 ranks, size small, 2 trials."""
    text = (ATTACKS / f"{name}.py").read_text()
    for key, value in values.items():
        text = text.replace(f"__{key}__", str(value))
    left = sorted(set(PLACEHOLDER.findall(text)))
    assert not left, f"{name}.py: no value for {left}"
    path = folder / f"{name}.py"
    path.write_text(text)
    config = EvalConfig(problem="all-reduce", solution_path=path, world_size=2, device="cpu",
                        size="small", trials=2, seed=1, timing=timing, limits=LIMITS,
                        resources=resources or ResourceLimits(), workdir=workdir)
    started = time.monotonic()
    report = evaluate(config)
    outcome = Outcome(dict(report), time.monotonic() - started, path)
    assert outcome.report["sandbox"] == "on", outcome
    return outcome


Runner = Callable[..., Outcome]


@pytest.fixture
def attack(tmp_path: Path, marker: str, secret: str) -> Runner:
    """``attack(name, **values)``: the candidate ``attacks/<name>.py`` with this test's marker and
    secret and ``values`` filled in, evaluated with the sandbox on (``timing``, ``resources`` and
    ``workdir`` can be changed)."""
    def run(name: str, *, timing: bool = False, resources: Optional[ResourceLimits] = None,
            workdir: Optional[Path] = None, **values: Any) -> Outcome:
        return run_attack(name, tmp_path, {"MARKER": marker, "SECRET": secret, **values}, timing=timing,
                          resources=resources, workdir=workdir)
    return run


# -- processes ----------------------------------------------------------------------------------

def processes_with(marker: str) -> list[tuple[int, str]]:
    """Live (not zombie) processes whose command line contains ``marker``, seen from the host."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if marker.encode() in cmdline and stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X"):
            found.append((int(entry), cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]))
    return found


def processes_left(marker: str, grace_s: float = 3.0) -> list[tuple[int, str]]:
    """What still runs ``grace_s`` after the evaluation returned (processes being killed need a moment)."""
    deadline = time.monotonic() + grace_s
    while True:
        left = processes_with(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def process_state(pid: int) -> dict[str, str]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


@pytest.fixture
def canary() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the test's own uid, outside every sandbox: candidates must not reach it."""
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def assert_untouched(process: subprocess.Popen[bytes]) -> None:
    assert process.poll() is None, f"the canary died ({process.returncode})"
    state = process_state(process.pid)
    assert state["State"][0] in "SR", f"the canary is {state['State']}"
    assert state["TracerPid"] == "0", f"the canary is traced by {state['TracerPid']}"


class InitWatch:
    """Samples, from the host, the resource limits of every sandbox init while a test runs."""

    ENTRY = b"evaluator.sandbox.init import main"

    def __init__(self) -> None:
        self.limits: dict[int, set[str]] = {}  # pid -> every distinct /proc/<pid>/limits text seen
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    if self.ENTRY in Path(f"/proc/{entry}/cmdline").read_bytes():
                        self.limits.setdefault(int(entry), set()).add(Path(f"/proc/{entry}/limits").read_text())
                except OSError:
                    continue
            time.sleep(0.005)

    def changed(self) -> dict[int, int]:
        """Inits whose limits changed while they ran (pid -> number of versions seen)."""
        self.stop.set()
        self.thread.join()
        return {pid: len(texts) for pid, texts in self.limits.items() if len(texts) > 1}


@pytest.fixture
def init_watch() -> Iterator[InitWatch]:
    watch = InitWatch()
    yield watch
    watch.stop.set()


# -- sockets the candidate should not reach -------------------------------------------------------

def _nonblocking_listener(family: int, address: Any) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind(address)
    sock.listen(64)
    sock.setblocking(False)
    return sock


def connections(sock: socket.socket, wait_s: float = 0.5) -> list[bytes]:
    """Connections that reached a listening socket (queued, even if the client is gone) and what
    each sent. Nothing accepts while the evaluation runs: the kernel queues completed connections."""
    time.sleep(wait_s)
    got = []
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return got
        conn.settimeout(0.5)
        data = b""
        try:
            while chunk := conn.recv(65536):
                data += chunk
        except OSError:
            pass
        conn.close()
        got.append(data)


@pytest.fixture
def tcp_listener() -> Iterator[socket.socket]:
    sock = _nonblocking_listener(socket.AF_INET, ("127.0.0.1", 0))
    yield sock
    sock.close()


@pytest.fixture
def udp_listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    yield sock
    sock.close()


def datagrams(sock: socket.socket, wait_s: float = 0.5) -> list[bytes]:
    time.sleep(wait_s)
    got = []
    while True:
        try:
            got.append(sock.recv(65536))
        except BlockingIOError:
            return got


@pytest.fixture
def unix_listener(marker: str) -> Iterator[tuple[socket.socket, str]]:
    """A stream socket at a path in the host's /tmp."""
    path = f"/tmp/pkb-attack-{marker}.sock"
    sock = _nonblocking_listener(socket.AF_UNIX, path)
    os.chmod(path, 0o777)  # only the namespaces stand between a candidate and this socket
    yield sock, path
    sock.close()
    os.unlink(path)


@pytest.fixture
def abstract_listener(marker: str) -> Iterator[tuple[socket.socket, str]]:
    """A stream socket in the abstract namespace (no file: only the network namespace separates it)."""
    name = f"pkb-attack-{marker}"
    sock = _nonblocking_listener(socket.AF_UNIX, "\0" + name)
    yield sock, name
    sock.close()


# -- services of the host -------------------------------------------------------------------------

class RawRedis:
    """Enough of RESP for EXISTS and DEL when the ``redis`` package is missing."""

    def __init__(self) -> None:
        self.sock = socket.create_connection(REDIS, timeout=3)

    def _call(self, *parts: str) -> bytes:
        self.sock.sendall(f"*{len(parts)}\r\n".encode()
                          + b"".join(b"$%d\r\n%s\r\n" % (len(p.encode()), p.encode()) for p in parts))
        return self.sock.recv(1024)

    def exists(self, key: str) -> int:
        return int(self._call("EXISTS", key).strip()[1:])

    def delete(self, key: str) -> None:
        self._call("DEL", key)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def redis_db(marker: str) -> Iterator[Any]:
    """A real connection to the host's Redis, which the candidate tries to write to."""
    try:
        import redis
        client: Any = redis.Redis(host=REDIS[0], port=REDIS[1], socket_timeout=3, socket_connect_timeout=3)
        client.ping()
    except ImportError:
        try:
            client = RawRedis()
        except OSError as exc:
            pytest.skip(f"no Redis on {REDIS[0]}:{REDIS[1]}: {exc}")
    except Exception as exc:  # noqa: BLE001 - redis raises its own ConnectionError
        pytest.skip(f"no Redis on {REDIS[0]}:{REDIS[1]}: {exc}")
    yield client
    client.delete(f"pkb-attack:{marker}")
    client.close()


@pytest.fixture
def postgres_db(marker: str) -> Iterator[Any]:
    """A real connection to the host's PostgreSQL, with the credentials a candidate could guess."""
    psycopg = pytest.importorskip("psycopg")
    try:
        conn = psycopg.connect(POSTGRES_DSN, connect_timeout=3, autocommit=True)
    except psycopg.Error as exc:
        pytest.skip(f"no PostgreSQL at {POSTGRES_DSN}: {exc}")
    yield conn
    conn.execute(f"DROP TABLE IF EXISTS pkb_attack_{marker}")
    conn.close()


# -- SysV shared memory of the host ---------------------------------------------------------------

class SysvSegment:
    IPC_CREAT, IPC_EXCL, IPC_RMID = 0o1000, 0o2000, 0

    def __init__(self, key: int, data: bytes) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.shmat.restype = ctypes.c_void_p
        self.libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
        self.key, self.size = key, 4096
        self.id = self.libc.shmget(ctypes.c_int(key), ctypes.c_size_t(self.size),
                                   ctypes.c_int(self.IPC_CREAT | self.IPC_EXCL | 0o666))
        if self.id < 0:
            raise OSError(ctypes.get_errno(), "shmget")
        self.address = self.libc.shmat(self.id, None, 0)
        ctypes.memmove(self.address, data, len(data))

    def read(self, n: int) -> bytes:
        return ctypes.string_at(self.address, n)

    def remove(self) -> None:
        self.libc.shmdt(ctypes.c_void_p(self.address))
        self.libc.shmctl(self.id, self.IPC_RMID, None)


@pytest.fixture
def sysv_segment(secret: str) -> Iterator[SysvSegment]:
    for _ in range(20):
        try:
            segment = SysvSegment(int.from_bytes(os.urandom(3), "big") + 0x50000000, secret.encode())
            break
        except OSError:
            continue
    else:
        pytest.skip("cannot create a SysV shared memory segment on this host")
    yield segment
    segment.remove()


# -- clean-up: whatever got through must not outlive the test ---------------------------------

def paths_with(marker: str, *folders: Path) -> list[Path]:
    found = []
    for folder in folders:
        try:
            found += [folder / name for name in os.listdir(folder) if marker in name]
        except OSError:
            continue
    return found


def host_folders() -> list[Path]:
    """Where attacks drop files, as the host sees them."""
    return [Path("/tmp"), Path("/dev/shm"), Path("/var/tmp"), HOST_HOME, HOST_HOME / ".config",
            HOST_HOME / ".cache" / "pkb" / "kernels", HOST_HOME / ".cache" / "pkb" / "kernels" / "ext",
            REPO, REPO / "problems", REPO / "evaluator", REPO / "evaluator" / "sandbox"]


def clean_up(marker: str) -> None:
    """Kill every process and remove every file an attack left (nothing, when the sandbox held)."""
    for pid, _ in processes_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for path in paths_with(marker, *host_folders()):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


@pytest.fixture(autouse=True)
def _clean_up_after_attack(marker: str) -> Iterator[None]:
    yield
    clean_up(marker)
