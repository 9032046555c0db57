"""Freezing a side (the judge times one side while the other stands still, docs/judge.md): every
process the side started stops, a detached one (its own session) included, and runs again after."""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

import pytest

from evaluator.config import ResourceLimits
from evaluator.sandbox import RankLaunch, open_box
from evaluator.sandbox.policy import rank_env


def rank_code(marker: str) -> str:
    """A rank that spins, and a detached child that spins, its command line carrying ``marker``."""
    return (f"import subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', 'while True: pass', '{marker}'], start_new_session=True)\n"
            f"while True: pass\n")


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total


def marked(pids_of: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if pids_of.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("confined", [pytest.param(True, marks=pytest.mark.confined), False])
def test_a_frozen_side_uses_no_cpu_until_it_is_thawed(confined):
    # The spinners are found by their command line in /proc, host-wide: a marker of this run
    # alone, or a copy of this test running beside it (pytest -n) would lend it its spinners.
    marker = f"__PKB_FREEZE_TEST_{secrets.token_hex(6)}__"
    with tempfile.TemporaryDirectory() as tmp:
        inbox = Path(tmp) / "in"
        inbox.mkdir()
        box = open_box(Path(tmp), inbox, "cpu", ResourceLimits(), confined=confined)
        log_r, log_w = os.pipe()
        stdin_r, stdin_w = os.pipe()
        os.close(stdin_w)
        env = rank_env("cpu", 1, home=box.home, work=box.work, confined=confined)
        box.start([RankLaunch(0, [sys.executable, "-c", rank_code(marker)], env, (), log_w, stdin_r)])
        os.close(log_w)
        try:
            deadline = time.monotonic() + 30
            while len(spinners := marked(marker)) < 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert spinners, "the detached spinner never started"
            if not confined:
                # Unconfined, a detached process is reached as a descendant of its rank.
                spinners = spinners[:1]
            assert box.freeze()
            frozen = cpu_ticks(spinners)
            time.sleep(0.5)
            assert cpu_ticks(spinners) == frozen
            box.thaw()
            time.sleep(0.5)
            assert cpu_ticks(spinners) > frozen
            box.stop()
            assert not marked(marker), "a detached process outlived its side"
        finally:
            box.stop()
            box.close()
            os.close(log_r)


def test_a_tasks_state_is_read_past_a_name_that_holds_parentheses_and_after_it_is_gone():
    """The freeze's reading of each thread (watch.task_state): the state follows the last ")" of
    the stat line's head, whatever the task calls itself; a task gone reads as "X"."""
    import signal
    import subprocess

    from evaluator.sandbox.watch import task_state

    code = ("import ctypes, time; ctypes.CDLL(None).prctl(15, b'a) b (c) S', 0, 0, 0); "
            "print('named', flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"named\n"
        stat = f"/proc/{child.pid}/stat"
        assert b"(a) b (c) S)" in Path(stat).read_bytes()
        assert task_state(stat) in ("R", "S")  # on its way to its sleep, or in it; never "b" or "c"
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while task_state(stat) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert task_state(stat) == "T"
    finally:
        child.kill()
        child.wait()
    assert task_state(stat) == "X"
