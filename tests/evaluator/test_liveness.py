"""The judge's reading of whether a side works (evaluator/judge/liveness.py): a window in which a
compiler ran and exited is a working window, and a side asleep is not."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from evaluator.judge.liveness import WINDOW_S, BusyWatch
from evaluator.procs import descendants

# A stand-in for a rank that builds: it starts a child that burns a core until told to stop (the
# compiler, a grandchild in real life), reaps it, then sleeps until told to end.
RANK = """
import subprocess, sys, time
from pathlib import Path
stop_child, end = Path(sys.argv[1]), Path(sys.argv[2])
child = subprocess.Popen([sys.executable, "-c",
    "import sys, pathlib\\nwhile not pathlib.Path(sys.argv[1]).exists(): pass", str(stop_child)])
child.wait()
while not end.exists():
    time.sleep(0.05)
"""


def _wait_for(condition, what: str, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _sample_after_window(watch: BusyWatch, pids: list[int]) -> bool:
    time.sleep(max(0.0, WINDOW_S - (time.monotonic() - watch.samples[-1][0])) + 0.05)
    return watch.busy(pids)


def test_the_window_in_which_a_compiler_exits_is_working_and_a_sleeping_side_is_not(tmp_path: Path):
    stop_child, end = tmp_path / "stop-child", tmp_path / "end"
    rank = subprocess.Popen([sys.executable, "-c", RANK, str(stop_child), str(end)])
    try:
        _wait_for(lambda: len(descendants([rank.pid])) == 2, "the compiler stand-in to start")
        watch = BusyWatch()
        assert not watch.busy(descendants([rank.pid])), "with nothing seen before, nothing is work"
        assert _sample_after_window(watch, descendants([rank.pid])), "a child burning a core is working"

        # The compiler runs most of the next window, then exits and is reaped before the sample:
        # its own time leaves the side's processes. Read as a difference of totals, this window
        # was negative, and a failing build looked like a deadlock (CI, 2026-11-27).
        time.sleep(WINDOW_S * 0.8)
        stop_child.touch()
        _wait_for(lambda: descendants([rank.pid]) == [rank.pid], "the rank to reap its child")
        assert _sample_after_window(watch, [rank.pid]), "the window in which the compiler exited is working"

        # Nothing burns now: a whole window of sleep must read as idle, or the check could not fail.
        assert not _sample_after_window(watch, [rank.pid])
    finally:
        end.touch()
        rank.wait(timeout=30)


def test_a_side_that_worked_then_fell_asleep_is_idle_as_soon_as_a_whole_window_is_asleep(tmp_path: Path):
    """The window ends now. The first reading used to span everything since the watch began (a
    side's whole start), and the next call within a window reused it: a rank asleep for 3.5 s
    passed a 2 s step limit in CI (2026-11-28, test_builds.py)."""
    stop_child, end = tmp_path / "stop-child", tmp_path / "end"
    rank = subprocess.Popen([sys.executable, "-c", RANK, str(stop_child), str(end)])
    try:
        _wait_for(lambda: len(descendants([rank.pid])) == 2, "the compiler stand-in to start")
        watch = BusyWatch()
        watch.note(descendants([rank.pid]))
        time.sleep(WINDOW_S * 1.5)  # burning all along
        stop_child.touch()
        _wait_for(lambda: descendants([rank.pid]) == [rank.pid], "the rank to reap its child")
        watch.note([rank.pid])
        time.sleep(WINDOW_S + 0.1)  # a whole window asleep
        assert not watch.busy([rank.pid]), "the work before the last window bought nothing"
        assert not watch.busy([rank.pid]), "and asking again at once reads the same"
    finally:
        end.touch()
        rank.wait(timeout=30)
