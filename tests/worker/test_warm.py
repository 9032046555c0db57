"""The warm evaluator (worker/warm.py): each job's `pkb eval` forked from one process that has
imported torch and the evaluator, with the job's own directory, environment, output and report
pipe; killed as a fresh process would be; gone with the worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contract.job import EvalJob
from worker import runner
from worker import warm as warm_module
from worker.warm import WarmEvaluator

from .test_progress import job

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def warm():
    """One template for the module's tests (its start is torch's import: a few seconds)."""
    env = runner.evaluator_env()
    template = WarmEvaluator(env)
    yield template, env
    template.close()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"


def test_a_job_forked_warm_gets_its_own_directory_and_pipes(warm, tmp_path: Path) -> None:
    template, env = warm
    (tmp_path / "bad.py").write_text("def solution(:\n")
    report_r, report_w = os.pipe()
    child = template.spawn(["eval", "--problem", "all-reduce", "--solution", "bad.py", "--world-size", "2",
                            "--device", "cpu", "--no-timing", "--json", "out.json", "--report-fd", str(report_w)],
                           str(tmp_path), env, {report_w: report_w})
    os.close(report_w)
    assert child is not None
    output = child.stdout.read()
    assert child.wait(60) == 0, output  # a report was made: `pkb eval` succeeded, whatever the verdict
    report = json.loads(os.read(report_r, 1 << 20))
    os.close(report_r)
    # Relative paths are the job's directory's, the report came on the pipe under the number the
    # command named, and what the CLI printed on the job's output.
    assert report["verdict"] == "fail" and report["failure"]["failure_class"] == "syntax_error"
    assert json.loads((tmp_path / "out.json").read_text())["verdict"] == "fail"
    assert b"syntax_error" in output or b"SyntaxError" in output or b"syntax" in output
    # A second job comes from the same warm process, and its exit status comes back.
    first = template.process.pid
    again = template.spawn(["eval", "--problem", "no-such-problem", "--solution", "x.py", "--world-size", "2"],
                           str(tmp_path), env, {})
    assert again is not None and again.wait(30) == 2 and template.process.pid == first
    assert b"no-such-problem" in again.stdout.read()  # its message names what was wrong (stderr, same pipe)


def test_a_killed_job_is_reported_killed_and_the_template_goes_on(warm, tmp_path: Path) -> None:
    template, env = warm
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(600)\nsolution = None\n")
    child = template.spawn(["eval", "--problem", "all-reduce", "--solution", str(slow), "--world-size", "2",
                            "--device", "cpu", "--size", "small", "--no-timing"], str(tmp_path), env, {})
    assert child is not None
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(1.0)
    os.killpg(child.pid, signal.SIGKILL)  # the runner kills the job's whole session
    assert child.wait(30) == -signal.SIGKILL
    assert template.spawn(["problems"], str(tmp_path), env, {}).wait(30) == 0


@pytest.mark.long  # a whole evaluation; tests/portal/test_worker_end_to_end.py takes this path in make test
def test_the_runner_evaluates_through_the_warm_evaluator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PKB_WARM_EVAL", raising=False)
    source = 'from problems import get as _get\n\nsolution = _get("all-reduce").reference\n'
    payload = job(source=source, trials=2)
    try:
        result = runner.run(EvalJob.from_payload(payload), runner.default_eval_command(), 300)
        assert result.report is not None and result.report["verdict"] == "pass", result.output_tail
        assert runner._warm is not None and runner._warm.alive()
    finally:
        if runner._warm is not None:
            runner._warm.close()
            runner._warm = None


def test_the_template_dies_with_the_worker(tmp_path: Path) -> None:
    """A SIGKILLed worker cannot stop what it started: the template (and through it every job it
    forked) is killed by the kernel when the worker's process goes."""
    script = tmp_path / "a_worker.py"
    script.write_text(
        "import os, sys, time\n"
        "from evaluator.sandbox import libc\n"
        "from worker import runner\n"
        "from worker.warm import WarmEvaluator\n"
        "w = WarmEvaluator(runner.evaluator_env(), preexec=libc.dies_with(os.getpid()))\n"
        "assert w.start()\n"
        "print(w.process.pid, flush=True)\n"
        "time.sleep(600)\n")
    worker = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    template_pid = int(worker.stdout.readline())
    assert not _gone(template_pid)
    worker.kill()
    worker.wait()
    deadline = time.monotonic() + 10
    while not _gone(template_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(template_pid)


def test_a_gpu_job_is_forked_only_from_a_template_that_never_loaded_the_cuda_driver(warm, tmp_path: Path) -> None:
    """A CUDA driver initialised before a fork is unusable in the child: the template says after
    its imports whether the driver library is mapped in it, and a GPU job from one where it is
    starts a fresh process instead (the runner's fallback)."""
    template, env = warm
    assert template.spawn(["problems"], str(tmp_path), env, {}).wait(30) == 0
    assert template.cuda_clean  # this machine's torch has no CUDA at all
    assert template.cuda_why == "the CUDA driver is not loaded in the template"
    try:
        template.cuda_clean = False  # as a template whose imports had initialised the driver would say
        template.cuda_why = "the CUDA driver is initialised in the template (cuCtxGetCurrent answered 0)"
        assert template.spawn(["problems"], str(tmp_path), env, {}, cuda=True) is None
        assert template.unavailable == ("a GPU job may not fork from this template: the CUDA driver "
                                        "is initialised in the template (cuCtxGetCurrent answered 0)")
        assert template.spawn(["problems"], str(tmp_path), env, {}, cuda=False).wait(30) == 0
    finally:
        template.cuda_clean = True


def test_a_template_with_the_driver_mapped_but_never_initialised_may_fork_gpu_jobs() -> None:
    """On the H200 hosts torch's imports map libcuda.so without calling cuInit; the driver itself
    says which (CUDA_ERROR_NOT_INITIALIZED before cuInit). Anything else keeps GPU jobs fresh."""
    asked = []

    def status(value: int):
        def ask() -> int:
            asked.append(value)
            return value
        return ask

    assert warm_module.cuda_fork_safety(False, False, status(0)) == (
        True, "the CUDA driver is not loaded in the template")
    assert asked == []  # an unmapped driver is never asked (asking would load it)
    safe, why = warm_module.cuda_fork_safety(False, True, status(warm_module.CUDA_ERROR_NOT_INITIALIZED))
    assert safe and "never initialised" in why
    safe, why = warm_module.cuda_fork_safety(False, True, status(0))
    assert not safe and "answered 0" in why
    safe, why = warm_module.cuda_fork_safety(False, True, status(-1))
    assert not safe and "could not be asked" in why
    safe, why = warm_module.cuda_fork_safety(True, True, status(warm_module.CUDA_ERROR_NOT_INITIALIZED))
    assert not safe and why == "torch initialised CUDA in the template"
    # On this machine (no driver at all) the probe loads nothing and says it cannot ask.
    assert warm_module._driver_context_status() == -1
