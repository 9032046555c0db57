"""A CPU side's ranks are forked from one process that imported torch once (evaluator/sandbox/
zygote.py), and each still starts as an exec'd rank did: its own stdin (token), only its own
descriptors, the argv it was given, fresh standard streams; confined, its own user namespace and
uid; unconfined, a session of its own, and its exit status reaches the box."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from evaluator.config import ResourceLimits
from evaluator.sandbox import RankLaunch, open_box
from evaluator.sandbox.policy import SANDBOX_UID, rank_env

CONFINED = [pytest.param(True, marks=pytest.mark.confined, id="confined"), pytest.param(False, id="unconfined")]

# What a rank reports about itself, on its log, as one JSON line.
PROBE = r"""
import json, os, sys
token = sys.stdin.readline().strip()
listing = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
fds = []
for name in os.listdir(listing):  # which dups `listing` while it reads: gone by the readlink
    try:
        os.readlink(f"/proc/self/fd/{name}")
    except OSError:
        continue
    if int(name) != listing:
        fds.append(int(name))
fds.sort()
print(json.dumps({
    "torch_preloaded": "torch" in sys.modules,
    "token": token,
    "argv": sys.argv,
    "uid": os.getuid(),
    "userns": os.readlink("/proc/self/ns/user"),
    "fds": fds,
    "cwd": os.getcwd(),
    "omp": os.environ.get("OMP_NUM_THREADS"),
    "session_leader": os.getsid(0) == os.getpid(),
    "nice": os.getpriority(os.PRIO_PROCESS, 0),
}), flush=True)
sys.exit(3)
"""


def run_side(argv_of: Any, confined: bool, ranks: int = 2) -> list[dict[str, Any]]:
    """Start ``ranks`` ranks in a CPU box, each with a token on stdin and one extra descriptor of
    its own; what each printed, and its exit status as the box reported it."""
    with tempfile.TemporaryDirectory() as tmp:
        inbox = Path(tmp) / "in"
        inbox.mkdir()
        box = open_box(Path(tmp), inbox, "cpu", ResourceLimits(), confined=confined)
        env = rank_env("cpu", 1, home=box.home, work=box.work, confined=confined)
        launches, logs, ours = [], [], []
        for rank in range(ranks):
            log_r, log_w = os.pipe()
            stdin_r, stdin_w = os.pipe()
            os.write(stdin_w, f"token-{rank}\n".encode())
            os.close(stdin_w)
            extra_r, extra_w = os.pipe()  # stands for the rank's status pipe
            launches.append(RankLaunch(rank, argv_of(rank, extra_w), env, (extra_w,), log_w, stdin_r))
            logs.append(log_r)
            ours += [log_w, stdin_r, extra_w, extra_r]
        try:
            box.start(launches)
            for fd in ours:
                os.close(fd)
            found = []
            for log in logs:
                text = b""
                deadline = time.monotonic() + 60
                while not text.endswith(b"\n") and time.monotonic() < deadline:
                    chunk = os.read(log, 65536)
                    if not chunk:
                        break
                    text += chunk
                found.append(json.loads(text.decode().strip().splitlines()[-1]))
            codes: dict[int, int] = {}
            deadline = time.monotonic() + 30
            while len(codes) < ranks and time.monotonic() < deadline:
                codes.update({e["rank"]: e["code"] for e in box.events() if e["event"] == "exit"})
                time.sleep(0.05)
            return [{**seen, "code": codes.get(rank)} for rank, seen in enumerate(found)]
        finally:
            box.stop()
            box.close()
            for log in logs:
                os.close(log)


@pytest.mark.parametrize("confined", CONFINED)
def test_cpu_ranks_are_forked_with_torch_imported_and_each_starts_as_its_own_process(confined):
    seen = run_side(lambda rank, fd: [sys.executable, "-I", "-c", PROBE, f"rank{rank}", str(fd)], confined)
    for rank, rank_seen in enumerate(seen):
        assert rank_seen["torch_preloaded"], "the rank imported torch itself: it was exec'd, not forked"
        assert rank_seen["token"] == f"token-{rank}"  # its own stdin, nothing read ahead by another
        assert rank_seen["argv"] == ["-c", f"rank{rank}", rank_seen["argv"][2]]
        # 0, 1, 2 and its own descriptor: nothing of the other rank's, nor of the zygote's
        assert rank_seen["fds"] == [0, 1, 2, int(rank_seen["argv"][2])]
        assert rank_seen["omp"] == "1"
        assert rank_seen["cwd"].endswith("work")
        assert rank_seen["code"] == 3  # its own exit status, as the box reports it
        if confined:
            assert rank_seen["uid"] == SANDBOX_UID
        else:
            assert rank_seen["session_leader"]  # a kill of its process group takes what it started
    if confined:
        assert seen[0]["userns"] != seen[1]["userns"], "both ranks share a user namespace"


@pytest.mark.parametrize("confined", CONFINED)
def test_a_launch_that_is_not_python_dash_c_is_started_by_exec(confined):
    seen = run_side(lambda rank, fd: [sys.executable, "-c", PROBE, f"rank{rank}", str(fd)], confined, ranks=1)
    assert not seen[0]["torch_preloaded"]
    assert seen[0]["token"] == "token-0" and seen[0]["code"] == 3


@pytest.mark.skipif(os.geteuid() != 0, reason="lowering the priority back needs root")
@pytest.mark.parametrize("forked", [True, False], ids=["zygote", "exec"])
@pytest.mark.confined
def test_confined_ranks_run_at_the_evaluators_priority_not_above_it(forked):
    """The init runs at a higher priority (to keep up with what it must stop); the ranks take the
    evaluator's own, so a nice'd evaluation stays nice'd."""
    python = [sys.executable, "-I", "-c"] if forked else [sys.executable, "-c"]
    before = os.getpriority(os.PRIO_PROCESS, 0)
    evaluator_nice = min(19, before + 7)  # the kernel caps niceness at 19 (a nice'd test run)
    os.setpriority(os.PRIO_PROCESS, 0, evaluator_nice)
    try:
        seen = run_side(lambda rank, fd: [*python, PROBE, f"rank{rank}", str(fd)], True, ranks=1)
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)
    assert evaluator_nice > 0 and seen[0]["nice"] == evaluator_nice
