"""`pkb --help` names every command, local and remote, and the options a newcomer types first
say what they take."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pkb_client.cli import build_parser
from pkb_client.commands import COMMANDS

ROOT = Path(__file__).parents[2]


def _help(*argv: str) -> str:
    out = subprocess.run([sys.executable, "-m", "evaluator.cli", *argv, "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_pkb_help_lists_the_remote_commands_beside_the_local_ones() -> None:
    text = _help()
    listed = {line.split()[0] for line in text.splitlines() if line.startswith("    ") and line.split()}
    assert {"eval", "sweep", "problems", "check-references", "probe"} <= listed
    assert set(COMMANDS) == {"login", "submit", "run", "prompt", "agent"}
    assert set(COMMANDS) <= listed, text


@pytest.mark.parametrize("command", ["submit", "prompt", "agent", "run create", "run import"])
def test_problem_hardware_and_model_say_what_they_take(command: str) -> None:
    words = command.split()
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[words[0]]  # type: ignore[union-attr]
    if len(words) > 1:
        sub = sub._subparsers._group_actions[0].choices[words[1]]  # type: ignore[union-attr]
    helps = {a.dest: a.help for a in sub._actions}
    for dest in ("problem", "hardware", "model"):
        if dest in helps:
            assert helps[dest] and len(helps[dest]) > 15, (command, dest)
    assert "hardware" in helps or "problem" in helps


def test_submit_and_prompt_take_hardware_as_optional() -> None:
    for command in ("submit", "prompt"):
        usage = _help(command).split("options:")[0]
        assert "[--hardware HARDWARE]" in " ".join(usage.split()), usage
