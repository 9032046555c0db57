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
