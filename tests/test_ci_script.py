""".ci/run, which decides whether a change lands: strict from its first command, and running the
very test commands the README gives a newcomer."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci" / "run"


def commands(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_ci_script_stops_at_its_first_failure():
    # A command before `set -e` fails without failing CI (a merge once left two `make` lines
    # above it: they ran, failed and were ignored, and doubled CI's time).
    assert commands(CI)[0] == "set -euo pipefail"


def test_the_ci_script_runs_the_readmes_test_commands():
    readme = (ROOT / "README.md").read_text()
    fresh_machine = readme.split("## On a fresh machine", 1)[1].split("\n## ", 1)[0]
    test_command = re.search(r"^\s+(make test)\s", fresh_machine, re.MULTILINE)
    assert test_command, "the README's fresh-machine section gives no `make test`"
    ran = commands(CI)
    assert test_command.group(1) in ran
    assert "make test-long" in ran  # what `make test` leaves out, and the README says CI runs
    assert ran.count("make test") == 1 and ran.count("make test-long") == 1
