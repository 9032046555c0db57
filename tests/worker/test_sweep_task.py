"""The worker's part in a sweep (worker/tasks.py): after a passing evaluation that asked for one, it
runs the job's `pkb sweep` and posts its report to the submission's sweep endpoint; after a failing
one it runs nothing more. A stand-in for `pkb` answers both commands here; the real evaluator's
sweep is tests/evaluator/test_sweep.py's, the portal's side tests/portal/test_sweeps.py's, and
all of it through a real Celery worker and a live server tests/portal/test_sweep_worker.py's
(make test-long)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from contract.job import EvalJob
from worker import tasks
from worker.config import WorkerConfig

# Stands in for `pkb`: writes its report on --report-fd, and each command line it ran to calls.jsonl.
FAKE_PKB = r'''
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
with open(Path(__file__).with_name("calls.jsonl"), "a") as calls:
    calls.write(json.dumps(args) + "\n")
solution = Path(args[args.index("--solution") + 1]).read_text()
if args[0] == "eval":
    report = {"verdict": "fail" if "WRONG" in solution else "pass"}
else:
    report = {"kind": "sweep", "sizes": args[args.index("--sizes") + 1:args.index("--sizes") + 3]}
os.write(int(args[args.index("--report-fd") + 1]), json.dumps(report).encode())
'''
SWEEP_SIZES = [4096, 16384]


def job(source: str) -> dict[str, Any]:
    return {"submission_id": 7, "problem": "all-reduce", "problem_version": "v1", "source": source,
            "world_size": 2, "device": "cpu", "size": "small", "dtype": None, "trials": 2,
            "hardware_profile": None, "timeout_s": 900, "token": "t", "sweep": True,
            "sweep_sizes": SWEEP_SIZES, "sweep_timeout_s": 600,
            "callback_url": "http://portal.invalid/api/v1/worker/submissions/7/"}


@pytest.fixture
def fake_pkb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    script = tmp_path / "pkb.py"
    script.write_text(FAKE_PKB)
    posts: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(tasks.callback, "post", lambda url, token, body, **kw: posts.append((url, body)) or {})
    config = WorkerConfig(eval_command=[sys.executable, str(script)], portal_url="", name="w1",
                          spool_dir=str(tmp_path / "spool"))
    return {"config": config, "posts": posts, "calls": tmp_path / "calls.jsonl"}


def _calls(fake: dict[str, Any]) -> list[list[str]]:
    return [json.loads(line) for line in fake["calls"].read_text().splitlines()]


def test_a_passing_evaluation_is_swept_and_the_sweep_posted_to_its_endpoint(fake_pkb: dict[str, Any]) -> None:
    assert tasks.evaluate_job(job("solution = None\n"), fake_pkb["config"]) == "report+sweep"
    calls = _calls(fake_pkb)
    assert [c[0] for c in calls] == ["eval", "sweep"]
    sweep = calls[1]
    assert sweep[sweep.index("--sizes") + 1:sweep.index("--sizes") + 3] == ["4096", "16384"]
    results = [(url, body) for url, body in fake_pkb["posts"] if not url.endswith("/status/")]
    assert [url for url, _ in results] == ["http://portal.invalid/api/v1/worker/submissions/7/report/",
                                           "http://portal.invalid/api/v1/worker/submissions/7/sweep/"]
    assert results[0][1] == {"report": {"verdict": "pass"}, "worker": "w1"}
    assert results[1][1] == {"sweep": {"kind": "sweep", "sizes": ["4096", "16384"]}, "worker": "w1"}


def test_a_failing_evaluation_is_not_swept(fake_pkb: dict[str, Any]) -> None:
    assert tasks.evaluate_job(job("WRONG = 1\n"), fake_pkb["config"]) == "report"
    assert [c[0] for c in _calls(fake_pkb)] == ["eval"]
    results = [url for url, _ in fake_pkb["posts"] if not url.endswith("/status/")]
    assert results == ["http://portal.invalid/api/v1/worker/submissions/7/report/"]


def test_the_sweep_command_the_worker_runs_is_one_the_real_pkb_sweep_takes(monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path) -> None:
    """The worker's `pkb sweep` command line, read by the real `pkb` (argument parsing and the
    checks before any evaluation runs), up to the sweep itself."""
    import os

    import evaluator.sweep
    from evaluator.cli import main

    class Reached(Exception):
        pass

    seen: dict[str, Any] = {}

    def run_sweep(config: Any, **kwargs: Any) -> None:
        seen.update(config=config, **kwargs)
        raise Reached

    monkeypatch.setattr(evaluator.sweep, "run_sweep", run_sweep)
    solution = tmp_path / "solution.py"
    solution.write_text("solution = None\n")
    read, write = os.pipe()
    try:
        argv = EvalJob.from_payload(job("")).sweep_command(["pkb"], solution, write, 900, ("--no-sandbox",))
        with pytest.raises(Reached):
            main(argv[1:])
    finally:
        os.close(read)
        os.close(write)
    config = seen["config"]
    assert seen["targets"] == SWEEP_SIZES
    assert (config.problem, config.world_size, config.device, config.trials) == ("all-reduce", 2, "cpu", 2)
    assert config.sandbox is False and 0 < config.deadline_s <= 600
