"""A GPU host runs the worker from a checkout with torch alone: nothing of ours is installed, the
evaluation runs in a temporary directory, and it must still find the evaluator (the checkout's)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import venv
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

# What `celery -A worker worker` does from the checkout, less the broker: the checkout on sys.path,
# one job taken, its outcome printed. -I: no PYTHONPATH, no user site, nothing from this test's env.
WORKER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from worker import tasks
from worker.config import WorkerConfig
config = WorkerConfig(spool_dir=sys.argv[3], name="bare-checkout", eval_command=WorkerConfig().eval_command)
print("OUTCOME", tasks.evaluate_job(json.loads(sys.argv[2]), config))
"""


def bare_python(where: Path) -> Path:
    """An interpreter that sees torch and celery (this environment's site-packages, as a plain
    path: its .pth files, the editable install among them, are not run) and nothing of ours."""
    venv.EnvBuilder(with_pip=False).create(where)
    purelib = next(where.glob("lib/python3*/site-packages"))
    (purelib / "host-packages.pth").write_text(
        "\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    return where / "bin" / "python"


class Portal(BaseHTTPRequestHandler):
    posts: list[tuple[str, dict[str, Any]]] = []

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.posts.append((self.path, json.loads(body)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def portal() -> Iterator[str]:
    Portal.posts = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Portal)
    # shutdown() waits for the server's next poll: 0.5 s by default
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/api/v1/worker/submissions/5/"
    server.shutdown()
    server.server_close()


def test_a_worker_started_from_a_bare_checkout_gets_a_verdict(tmp_path: Path, portal: str,
                                                              request: pytest.FixtureRequest) -> None:
    python = bare_python(tmp_path / "host")
    nowhere = tmp_path / "cwd"
    nowhere.mkdir()
    bare = subprocess.run([str(python), "-I", "-c", "import evaluator"], cwd=nowhere, capture_output=True)
    assert b"No module named 'evaluator'" in bare.stderr  # the host has no installed package
    job = {"submission_id": 5, "problem": "all-reduce", "problem_version": "v1",
           "source": (ROOT / "solutions/broken/cpu_correct.py").read_text(), "world_size": 2,
           "device": "cpu", "size": "small", "dtype": None, "trials": 1, "hardware_profile": None,
           "timeout_s": 300, "token": "t", "callback_url": portal}
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    if request.config.getoption("--sandbox") == "off":
        env["PKB_WORKER_ALLOW_UNSANDBOXED"] = "1"
    done = subprocess.run([str(python), "-I", "-c", WORKER, str(ROOT), json.dumps(job), str(tmp_path / "spool")],
                          cwd=nowhere, env=env, capture_output=True, text=True, timeout=400)
    reports = [body for path, body in Portal.posts if path.endswith("/report/")]
    assert "OUTCOME report" in done.stdout, (done.stdout + done.stderr)[-3000:] + str(reports)[-2000:]
    assert len(reports) == 1 and reports[0]["report"]["verdict"] == "pass"
    assert reports[0]["report"]["problem"]["slug"] == "all-reduce"
