"""What the sandbox adds to one side: set-up and tear-down of a box around one trivial rank.

    python3 scripts/sandbox/overhead.py [--reps 20]

Prints the median seconds per side for the confined and the plain box and their difference,
with the machine and commit, so the number in docs/sandbox.md can be reproduced.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evaluator.config import ResourceLimits  # noqa: E402
from evaluator.sandbox import RankLaunch, open_box  # noqa: E402
from evaluator.sandbox.box import OutputRules  # noqa: E402
from evaluator.sandbox.policy import rank_env  # noqa: E402


def one_side(confined: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="pkb-overhead-") as tmp:
        inbox = Path(tmp) / "in"
        inbox.mkdir()
        started = time.perf_counter()
        box = open_box(Path(tmp), inbox, "cpu", ResourceLimits(), confined=confined)
        read, write = os.pipe()
        stdin = os.open(os.devnull, os.O_RDONLY)
        env = rank_env("cpu", 1, home=box.home, work=box.work, confined=confined)
        box.start([RankLaunch(0, [sys.executable, "-I", "-c", "pass"], env, (), write, stdin)])
        os.close(write)
        os.close(stdin)
        while not any(e["event"] == "exit" for e in box.events()):
            time.sleep(0.002)
        box.stop()
        box.copy_outputs(Path(tmp) / "outputs", OutputRules(frozenset({0}), 1, 1, 2**20))
        box.close()
        os.close(read)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"kernel {platform.release()}, commit {commit}")
    medians = {}
    for confined in (False, True, False, True):
        times = [one_side(confined) for _ in range(args.reps)]
        medians.setdefault(confined, []).append(statistics.median(times))
    plain, boxed = min(medians[False]), min(medians[True])
    print(f"| box | median s per side (trivial rank, {args.reps} reps, best of 2 rounds) |\n|---|---|")
    print(f"| plain | {plain:.3f} |\n| confined | {boxed:.3f} |\n| added by the sandbox | {boxed - plain:.3f} |")


if __name__ == "__main__":
    main()
