"""The remote `pkb` client on its own: no Django or torch, the dispatch from the local `pkb`,
the exit codes a script sees without a portal, the token file's permissions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pkb_client import config, exits
from pkb_client.agent import extract_solution
from pkb_client.cli import main
from pkb_client.reports import feedback

ROOT = Path(__file__).parents[2]


def test_the_client_imports_neither_django_nor_torch() -> None:
    code = ("import sys; sys.modules['django'] = None; sys.modules['torch'] = None\n"
            "import pkb_client.cli, pkb_client.agent\n"
            "from evaluator.cli import main\n"
            "try:\n    main(['run', 'status', '--help'])\nexcept SystemExit as e:\n    print('exit', e.code)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "exit 0" in out.stdout and "--wait" in out.stdout


def test_exit_codes_without_a_portal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main(["--server", "http://127.0.0.1:9", "run", "status", "1", "--json"]) == exits.UNREACHABLE
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "unreachable"
    assert main(["submit", str(tmp_path / "nope.py"), "--problem", "p", "--hardware", "h"]) == exits.USAGE
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        main(["run", "frobnicate"])
    assert bad.value.code == exits.USAGE


def test_the_token_file_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("PKB_TOKEN", raising=False)
    path = config.save({"server": "http://x", "token": "secret"})
    assert oct(path.stat().st_mode & 0o777) == "0o600" and config.token() == "secret"
    monkeypatch.setenv("PKB_TOKEN", "from-env")
    assert config.token() == "from-env"


def test_the_model_output_and_the_feedback() -> None:
    assert extract_solution("text\n```python\na = 1\n```\nmore\n```python\ndef solution(): pass\n```") \
        == "def solution(): pass\n"
    assert extract_solution("def solution(x):\n    return x\n") == "def solution(x):\n    return x\n"
    sub = {"status": "finished", "verdict": "fail", "failure_class": "compile_error",
           "candidate_ms": None, "report": {"failure": {"rank": 0, "message": "nvcc failed",
                                                        "compiler_output": "error: expected ';'"}}}
    text = feedback(sub, 2)
    assert "turn 2" in text and "compile_error" in text and "rank 0" in text and "expected ';'" in text
    refused = feedback(None, 1, refused={"code": "syntax_error", "message": "line 3"})
    assert "syntax_error: line 3" in refused


class _RefusingPortal:
    """The two calls the agent makes, answered as a portal answers when the run is full."""

    def get(self, path: str, **params: object) -> dict:
        assert path == "prompt/"
        return {"prompt": "write all-reduce"}

    def post(self, path: str, **kwargs: object) -> dict:
        return {"files": [{"status": "rejected", "code": "too_many_samples", "submission": None,
                           "message": "all-reduce already has the run's k = 1 samples"}]}


def test_the_agent_stops_when_the_run_refuses_a_turn() -> None:
    from pkb_client.agent import run_agent
    from pkb_client.http import ApiError

    with pytest.raises(ApiError) as refused:
        run_agent(_RefusingPortal(), run_id=1, problem="all-reduce", hardware="h", backend="torch",  # type: ignore[arg-type]
                  command=f"{sys.executable} -c \"print('def solution(x, *, group): return x')\"",
                  turns=3, wait_s=1, model_timeout_s=30, show=lambda line: None)
    assert refused.value.code == "too_many_samples" and refused.value.exit_code == exits.REFUSED


class _NoWorkerPortal(_RefusingPortal):
    """A portal whose hardware lost its worker: the turn's sample is refused with 503."""

    def post(self, path: str, **kwargs: object) -> dict:
        from pkb_client.http import _error

        raise _error(503, {"error": {"code": "no_worker", "field": "hardware",
                                     "message": "No worker serves h right now."}}, "")


def test_the_agent_stops_at_once_when_no_worker_serves_the_hardware() -> None:
    from pkb_client.agent import run_agent
    from pkb_client.http import ApiError

    asked: list[str] = []
    with pytest.raises(ApiError) as refused:
        run_agent(_NoWorkerPortal(), run_id=1, problem="all-reduce", hardware="h", backend="torch",  # type: ignore[arg-type]
                  command=f"{sys.executable} -c \"print('def solution(x, *, group): return x')\"",
                  turns=3, wait_s=3600, model_timeout_s=30, show=asked.append)
    assert refused.value.code == "no_worker" and refused.value.exit_code == exits.REFUSED
    assert "No worker serves h" in refused.value.message and asked == ["turn 1/3: asking the model"]
