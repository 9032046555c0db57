"""The worker reads `pkb eval --progress`: compiling until the candidate is ready, then running."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from contract.job import EvalJob
from contract.progress import parse_line
from worker import progress, runner, tasks
from worker.config import WorkerConfig

# Stands in for `pkb eval`: prints progress as the evaluator does (stderr), then a report.
FAKE_EVAL = r'''
import json, os, sys
args = sys.argv[1:]
out = int(args[args.index("--report-fd") + 1])
assert "--progress" in args
def say(side, event, step=None):
    print("PKB-PROGRESS " + json.dumps({"side": side, "event": event, "step": step, "task": 0}),
          file=sys.stderr, flush=True)
print("building the kernel", flush=True)
for side in ("candidate", "reference"):
    say(side, "ready")
    say(side, "step", "trial 0")
    say(side, "step", "trial 1")
    say(side, "step", "timing started")
    say(side, "times")
    say(side, "done")
os.write(out, json.dumps({"verdict": "pass"}).encode())
'''


@pytest.fixture
def fake_eval(tmp_path: Path) -> list[str]:
    script = tmp_path / "fake_eval.py"
    script.write_text(FAKE_EVAL)
    return [sys.executable, str(script)]


def job(**extra: Any) -> dict[str, Any]:
    return {"submission_id": 7, "problem": "all-reduce", "problem_version": "v1", "source": "solution = None\n",
            "world_size": 2, "device": "cpu", "size": "small", "dtype": None, "trials": 2,
            "hardware_profile": None, "timeout_s": 900, "token": "t",
            "callback_url": "http://portal.invalid/api/v1/worker/submissions/7/", **extra}


def test_a_progress_line_is_parsed_and_others_are_not() -> None:
    line = 'PKB-PROGRESS {"side": "candidate", "event": "step", "step": "trial 0", "task": 0}\n'
    assert parse_line(line) == {"side": "candidate", "event": "step", "step": "trial 0", "task": 0}
    assert parse_line("trial 0 passed\n") is None
    assert parse_line("PKB-PROGRESS {not json\n") is None


def test_steps_read_as_sentences() -> None:
    tracker = progress.Tracker(trials=5)
    assert tracker.feed({"side": "candidate", "event": "step", "step": "trial 2"}) == \
        progress.Progress("compiling", "candidate: trial 3 of 5")
    assert tracker.feed({"side": "candidate", "event": "ready"}) == \
        progress.Progress("running", "candidate: started")
    assert tracker.feed({"side": "reference", "event": "step", "step": "timing started"}) == \
        progress.Progress("running", "reference: timing")
    assert tracker.feed({"side": "reference", "event": "times"}) is None


def test_the_runner_reports_each_step_and_keeps_them_out_of_the_output(fake_eval: list[str]) -> None:
    seen: list[progress.Progress] = []
    result = runner.run(EvalJob.from_payload(job()), fake_eval, 60, on_progress=seen.append)
    assert result.report == {"verdict": "pass"}
    assert seen[0] == progress.Progress("running", "candidate: started")
    assert [p.step for p in seen][1:5] == ["candidate: trial 1 of 2", "candidate: trial 2 of 2",
                                           "candidate: timing", "candidate: done"]
    assert seen[-1] == progress.Progress("running", "reference: done")
    assert "building the kernel" in result.output_tail and "PKB-PROGRESS" not in result.output_tail


def test_a_gpu_job_is_compiling_until_the_candidate_is_ready(fake_eval: list[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    posts: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(tasks.callback, "post",
                        lambda url, token, body, **kw: posts.append((url.rsplit("/", 2)[-2], body)) or {})
    config = WorkerConfig(eval_command=fake_eval, portal_url="", name="w1")
    assert tasks.evaluate_job(job(device="cuda"), config) == "report"
    statuses = [(body["status"], body["step"]) for what, body in posts if what == "status"]
    assert statuses[0] == ("compiling", "starting the evaluator")
    assert statuses[1][0] == "running" and statuses[-1] == ("running", "reference: done")
    assert posts[-1][0] == "report" and posts[-1][1]["report"] == {"verdict": "pass"}


def test_a_cpu_job_never_says_compiling(fake_eval: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # gloo on CPU builds nothing: the seconds before `ready` are process start-up and imports
    posts: list[dict[str, Any]] = []
    monkeypatch.setattr(tasks.callback, "post",
                        lambda url, token, body, **kw: posts.append(body) if url.endswith("status/") else {})
    config = WorkerConfig(eval_command=fake_eval, portal_url="", name="w1")
    assert tasks.evaluate_job(job(device="cpu"), config) == "report"
    statuses = [body["status"] for body in posts]
    assert statuses and set(statuses) == {"running"}
    assert posts[0]["step"] == "starting the evaluator"


def test_before_ready_a_cpu_tracker_is_running_and_a_gpu_one_compiling() -> None:
    early = {"side": "candidate", "event": "step", "step": "trial 0"}
    assert progress.Tracker(trials=5, device="cpu").feed(early) == progress.Progress("running", "candidate: trial 1 of 5")
    assert progress.Tracker(trials=5, device="cuda").feed(early) == progress.Progress("compiling", "candidate: trial 1 of 5")


def test_a_gpu_evaluator_that_dies_before_ready_never_says_running(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "crash.py"
    script.write_text("import sys\nprint('ImportError: no module named triton', file=sys.stderr)\n"
                      "sys.exit(3)\n")
    posts: list[dict[str, Any]] = []
    monkeypatch.setattr(tasks.callback, "post", lambda url, token, body, **kw: posts.append(body) or {})
    config = WorkerConfig(eval_command=[sys.executable, str(script)], portal_url="", name="w1")
    assert tasks.evaluate_job(job(device="cuda"), config) == "no-report"
    assert [p.get("status") for p in posts[:-1]] == ["compiling"]
    assert "no module named triton" in posts[-1]["output"] and "code 3" in posts[-1]["error"]
    assert json.dumps(posts[-1])  # plain JSON for the portal


def test_the_worker_logs_each_step_with_its_time_on_one_line(fake_eval: list[str], tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    # A candidate's rank writes its side's steps: a step holding a newline must not forge a log line.
    script = tmp_path / "forging_eval.py"
    script.write_text(FAKE_EVAL.replace('say(side, "ready")',
                                        'say(side, "ready", "startup: x\\nERROR/Worker] forged " + "y" * 500)'))
    with caplog.at_level("INFO", logger="worker.runner"):
        runner.run(EvalJob.from_payload(job()), [sys.executable, str(script)], 60)
    lines = [r.getMessage() for r in caplog.records if r.name == "worker.runner"]
    assert any(line.startswith("job 7 +") and ": candidate step 'trial 0'" in line for line in lines)
    ready = next(line for line in lines if "candidate ready" in line)
    assert "\n" not in ready and "\\n" in ready and len(ready) < 300


def test_a_step_named_with_a_digit_int_refuses_is_shown_as_named() -> None:
    # "²" is a digit to str.isdigit() but not a number int() reads: a rank names its own steps
    # (the GPU in-rank path), and one such name must not end the worker's task.
    assert progress.describe({"side": "candidate", "event": "step", "step": "trial ²"}, 5) == "candidate: trial ²"
    assert progress.describe({"side": "candidate", "event": "step", "step": "trial 2"}, 5) == "candidate: trial 3 of 5"
