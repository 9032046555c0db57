"""Where and when a benchmark ran: printed above every table it produces."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def lines() -> list[str]:
    # A device host's copy of the tree may carry an older .git: the sender names the commit.
    commit = os.environ.get("PKB_GIT_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return [f"command: {' '.join([Path(sys.executable).name, *sys.argv])}",
            f"date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
            f"machine: {os.cpu_count()} cores ({cpu}), load average {load} at the start",
            f"commit: {commit}"]
