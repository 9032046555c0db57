"""What `pkb submit` sends and how it exits: hardware left to the portal when not named, and a
portal that has no worker for the hardware is a refusal (3), not an unreachable portal (5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pkb_client import exits
from pkb_client.cli import main
from pkb_client.http import Api, ApiError, _error

NO_WORKER = {"error": {"code": "no_worker", "field": "hardware",
                       "message": "No worker serves h200-x4-nvlink (queue gpu.h200); try later."}}


@pytest.fixture
def solution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "solution.py"
    path.write_text("def solution(x, *, group):\n    return x\n")
    return path


def test_a_503_no_worker_is_a_refusal() -> None:
    assert _error(503, NO_WORKER, "").exit_code == exits.REFUSED


def test_other_server_errors_still_mean_unreachable() -> None:
    outage = {"error": {"code": "service_unavailable", "message": "database down", "field": ""}}
    assert _error(503, outage, "").exit_code == exits.UNREACHABLE
    assert _error(502, None, "<html>bad gateway</html>").exit_code == exits.UNREACHABLE


def test_submit_exits_3_when_no_worker_serves_the_hardware(
        solution: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(self: Api, path: str, **kwargs: Any) -> Any:
        raise _error(503, NO_WORKER, "")

    monkeypatch.setattr(Api, "post", refuse)
    code = main(["--server", "http://portal.test", "submit", str(solution), "--problem", "all-reduce",
                 "--hardware", "h200-x4-nvlink"])
    assert code == exits.REFUSED == 3
    assert "no_worker" in capsys.readouterr().err


def test_submit_without_hardware_leaves_the_choice_to_the_portal(
        solution: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sent: list[dict[str, Any]] = []

    def accept(self: Api, path: str, **kwargs: Any) -> Any:
        sent.append(kwargs["data"])
        return {"id": 7, "status": "queued"}

    monkeypatch.setattr(Api, "post", accept)
    assert main(["--server", "http://portal.test", "submit", str(solution), "--problem", "all-reduce"]) == 0
    assert sent and sent[0]["problem"] == "all-reduce" and "hardware" not in sent[0]
    assert "submission #7 queued" in capsys.readouterr().out


def test_prompt_without_hardware_asks_without_it(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    asked: list[dict[str, Any]] = []

    def answer(self: Api, path: str, **params: Any) -> Any:
        asked.append(params)
        return {"prompt": "write all-reduce"}

    monkeypatch.setattr(Api, "get", answer)
    assert main(["--server", "http://portal.test", "prompt", "--problem", "all-reduce"]) == 0
    assert asked == [{"problem": "all-reduce", "hardware": None, "backend": "torch"}]
    assert "write all-reduce" in capsys.readouterr().out


def test_an_api_error_without_a_status_is_unreachable() -> None:
    assert ApiError("cannot reach", code="unreachable").exit_code == exits.UNREACHABLE


def test_the_agent_without_hardware_uses_the_portals_choice(
        solution: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # as submit and prompt do: the prompt's answer names the hardware the portal picked
    from pkb_client import agent

    asked: list[tuple[str, dict[str, Any]]] = []
    created: list[dict[str, Any]] = []
    ran: list[str] = []

    def get(self: Api, path: str, **params: Any) -> Any:
        asked.append((path, params))
        return {"hardware": "cpu-gloo-test", "prompt": "write it"}

    def post(self: Api, path: str, **kwargs: Any) -> Any:
        created.append(kwargs["json"])
        return {"id": 9}

    def run_agent(api: Api, **kwargs: Any) -> agent.AgentResult:
        ran.append(kwargs["hardware"])
        return agent.AgentResult(run=9)

    monkeypatch.setattr(Api, "get", get)
    monkeypatch.setattr(Api, "post", post)
    monkeypatch.setattr(agent, "run_agent", run_agent)
    main(["--server", "http://portal.test", "agent", "--model-command", "true",
          "--problem", "all-reduce", "--turns", "1"])
    assert asked and asked[0][0] == "prompt/" and asked[0][1].get("hardware") is None
    assert created[0]["hardware"] == "cpu-gloo-test" and ran == ["cpu-gloo-test"]
    assert "cpu-gloo-test" in capsys.readouterr().err
