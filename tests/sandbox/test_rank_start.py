"""A rank whose set-up before exec fails (dropping privileges, its user namespace) is started
again, and the step that failed reaches its log: nothing of the candidate has run yet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.sandbox import init


def _launch(tmp_path: Path) -> tuple[dict, int, Path]:
    log_path = tmp_path / "rank.log"
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT, 0o600)
    launch = {"argv": [sys.executable, "-c", "print('rank ran')"], "env": {}, "pass_fds": [],
              "stdin_fd": subprocess.DEVNULL}
    return launch, log, log_path


def _init(tmp_path: Path) -> init.SideInit:
    return init.SideInit({"limits": {}, "device": "cpu", "rank_uid": 0, "work": str(tmp_path)})


def test_a_start_that_fails_before_exec_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "failed-once"

    def flaky(limits, device, rank_uid, nice=0):  # runs in the forked child, hence the file
        if not marker.exists():
            marker.touch()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(init, "drop_privileges", flaky)
    launch, log, log_path = _launch(tmp_path)
    popen = _init(tmp_path)._spawn(launch, log)
    assert popen.wait(timeout=30) == 0 and marker.exists()
    os.close(log)
    assert log_path.read_text() == "rank ran\n"


def test_a_start_that_keeps_failing_gives_up_and_logs_the_step(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    tries = tmp_path / "tries"
    tries.mkdir()

    def refused(limits, device, rank_uid, nice=0):  # under the real drop_privileges, which logs it
        (tries / str(len(list(tries.iterdir())))).touch()
        raise PermissionError(1, "setresuid")

    monkeypatch.setattr(init, "_drop_privileges", refused)
    launch, log, log_path = _launch(tmp_path)
    with pytest.raises(subprocess.SubprocessError):
        _init(tmp_path)._spawn(launch, log)
    os.close(log)
    assert len(list(tries.iterdir())) == init.START_ATTEMPTS
    assert log_path.read_text().splitlines() == [
        "pkb sandbox: a rank's set-up before exec failed: PermissionError(1, 'setresuid')"] * init.START_ATTEMPTS


def test_a_rank_started_by_exec_holds_no_capability_and_runs_under_the_filter(tmp_path: Path) -> None:
    """The exec path (GPU ranks, and CPU launches the zygote declines) sets a rank up as the
    zygote's forks are: empty capability sets and the system-call filter, before the program runs
    (tests/sandbox/attacks/kernel_surface.py checks the zygote's forks)."""
    launch, log, log_path = _launch(tmp_path)
    launch["argv"] = [sys.executable, "-c", "print(''.join(line for line in open('/proc/self/status') "
                      "if line.startswith(('CapEff', 'CapPrm', 'Seccomp:', 'NoNewPrivs'))))"]
    limits = {"tasks_per_rank": 256, "open_files": 1024, "disk_bytes": 1 << 30, "memory_bytes_per_rank": 1 << 34}
    side = init.SideInit({"limits": limits, "device": "cpu", "rank_uid": 0, "work": str(tmp_path)})
    assert side._spawn(launch, log).wait(timeout=30) == 0
    os.close(log)
    status = dict(line.split(":", 1) for line in log_path.read_text().splitlines() if ":" in line)
    assert {key: value.strip() for key, value in status.items()} == {
        "NoNewPrivs": "1", "Seccomp": "2", "CapPrm": "0000000000000000", "CapEff": "0000000000000000"}
