"""The commands in README.md and docs/*.md run as written after the README's set-up.

Every command in a code block is found and classified (CLASSES): the cheap ones run here, the
CPU evaluations and sweeps in `make test-long`; the ones that need a GPU host, a running portal
or services, or minutes are checked without running them (and so are the CPU evaluations in
`make test`): the program exists, its subcommand and every option it uses are in its ``--help``, and
the files it names are in the repository. A command nobody classified fails the test, so a
new one in the docs gets the same look. docs/timing.md and docs/judge.md are checked too.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
# A command in a block starts with one of these (after VAR=value assignments).
PROGRAM = re.compile(r"^(?:[A-Z_]+=\S+ )*(\.venv/bin/\S+|python3?|pkb|make|pip|celery|bash|git|redis-server)\b")
# Commands in prose (backticks) that start a Python program: where python3 is allowed.
INLINE_PYTHON = re.compile(r"`((?:\.venv/bin/)?python3? +(?:-m |scripts/|manage\.py)[^`]*)`")
GPU_HOST = re.compile(r"--device cuda|scripts/gpu/|scripts/sandbox/gpu_|scripts/device/")

# How each command is checked, by the start of its text (after VAR=value assignments). "run":
# runs here within the time limit; "slow": a whole CPU evaluation or sweep, a minute or more each
# on a 2-core host: make test checks its options and files, make test-long runs it as written
# (marked long); the others are checked for existence and options only.
CLASSES: list[tuple[str, str]] = [
    (".venv/bin/pkb problems", "run"),
    (".venv/bin/pkb eval", "slow"),
    (".venv/bin/pkb sweep", "slow"),
    (".venv/bin/pkb check-references", "minutes"),  # every reference at two world sizes
    (".venv/bin/pkb probe --device cuda", "gpu"),
    (".venv/bin/python scripts/exact/calibration.py", "minutes"),
    (".venv/bin/python scripts/bench/freeze_cost.py", "run"),  # 30 freezes of a two-rank side
    (".venv/bin/python scripts/bench/judge_overhead.py", "slow"),  # bare loops beside whole evaluations
    ("python3 scripts/bench/judge_overhead.py", "gpu"),
    (".venv/bin/python scripts/bench/", "services"),  # a PostgreSQL database of 100,000 rows
    (".venv/bin/python scripts/container/", "setup"),  # writes a container runtime's profile
    (".venv/bin/python -m gunicorn", "services"),
    (".venv/bin/python -m pytest", "services"),
    (".venv/bin/python manage.py pkb_up", "services"),  # serves until stopped
    (".venv/bin/pip install", "setup"),
    ("make ", "setup"),
    ("pip install ./client", "setup"),
    ("pkb ", "portal"),  # the remote client (pip install ./client) against a running portal
    ("celery ", "services"),
    ("redis-server ", "services"),
    ("git -C ParallelKernelBench", "portal"),  # a clone of another repository
    ("bash scripts/device/", "gpu"),
    ("python3 scripts/device/", "gpu"),  # scripts/device/pkb_harness.py: PKB's own harness on a GPU host (docs/runs.md)
    ("python3 -m evaluator.cli", "gpu"),  # the GPU hosts: torch alone, no venv (README)
]


def blocks(text: str) -> list[list[str]]:
    """Fenced blocks, and indented blocks that follow a blank line."""
    found: list[list[str]] = []
    current: list[str] = []
    fenced = blank = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            if fenced:
                found.append(current)
                current = []
            fenced = not fenced
        elif fenced:
            current.append(line)
        elif line.startswith("    ") and (blank or current):
            current.append(line[4:])
        elif current:
            found.append(current)
            current = []
        blank = not line.strip()
    return found + ([current] if current else [])


def commands(path: Path) -> list[str]:
    """The commands of a file's code blocks: continuation lines joined, trailing comments cut."""
    found = []
    for block in blocks(path.read_text()):
        line = ""
        for raw in block:
            line = f"{line} {raw.strip()}".strip()
            if line.endswith("\\"):
                line = line[:-1].rstrip()
                continue
            command = re.split(r"\s{2,}#", line)[0].strip()
            if PROGRAM.match(command):
                found.append(command)
            line = ""
    return found


def kind(command: str) -> str:
    bare = re.sub(r"^(?:[A-Z_]+=\S+ )+", "", command)
    return next((k for start, k in CLASSES if bare.startswith(start)), "unclassified")


ALL = [(path.name, c) for path in DOCS for c in commands(path)]


def test_the_docs_have_commands_and_each_is_classified() -> None:
    assert len(ALL) > 20 and any(name == "README.md" for name, _ in ALL)
    loose = [f"{name}: {c}" for name, c in ALL if kind(c) == "unclassified"]
    assert not loose, "classify these in CLASSES (run, slow, minutes, gpu, services, portal, setup):\n" + "\n".join(loose)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_python_runs_from_the_venv_except_on_gpu_hosts(path: Path) -> None:
    """`python3 scripts/x.py` fails after the README's set-up (torch lives in .venv)."""
    text = path.read_text()
    candidates = [c for c in commands(path) if re.match(r"^(?:[A-Z_]+=\S+ )*python3? ", c)]
    candidates += [m.group(1) for m in INLINE_PYTHON.finditer(text.replace("\n", " "))
                   if not m.group(1).startswith(".venv/")]
    wrong = [c for c in candidates if not GPU_HOST.search(c)]
    assert not wrong, f"{path.name}: use .venv/bin/python (or name the GPU host): {wrong}"


def _argv(command: str) -> list[str]:
    """The command as this interpreter runs it: `.venv/bin/pkb` is `python -m evaluator.cli`
    of this checkout, `.venv/bin/python` is sys.executable."""
    words = shlex.split(re.sub(r"^(?:[A-Z_]+=\S+ )+", "", command))
    if words[0] == ".venv/bin/pkb":
        return [sys.executable, "-m", "evaluator.cli", *words[1:]]
    if words[0] == ".venv/bin/python":
        return [sys.executable, *words[1:]]
    if words[0] in ("pkb", "python3"):  # the client alone, or a GPU host's bare interpreter
        return [sys.executable, "-m", "evaluator.cli", *words[1:]] if words[0] == "pkb" else \
            [sys.executable, *words[1:]]
    return words


def _checked_without_running(command: str) -> None:
    argv = _argv(command)
    if argv[:3] == [sys.executable, "-m", "evaluator.cli"]:
        words = [w for w in argv[3:] if not w.startswith("-")]
        sub = argv[3:4] + (words[1:2] if argv[3] == "run" else [])
        out = subprocess.run([*argv[:3], *sub, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"{command}: {out.stderr}"
        options = [w.split("=")[0] for w in argv[3:] if w.startswith("--")]
        missing = [o for o in options if o not in out.stdout]
        assert not missing, f"{command}: `{' '.join(sub)} --help` has no {missing}"
    for word in argv[1:]:
        if re.match(r"^(scripts|solutions|problems|hardware|docs)/\S+\.(py|sh|json)$", word):
            assert (ROOT / word).exists(), f"{command}: no file {word}"
    if argv[0] == "bash":
        assert (ROOT / argv[1]).is_file(), f"{command}: no script {argv[1]}"


@pytest.mark.parametrize("name,command", [c for c in ALL if kind(c[1]) in ("minutes", "gpu", "services", "portal")],
                         ids=lambda v: v if len(str(v)) < 60 else str(v)[:60])
def test_commands_that_do_not_run_here_name_real_options_and_files(name: str, command: str) -> None:
    _checked_without_running(command)


def _run(command: str, timeout_s: int) -> None:
    (ROOT / "var").mkdir(exist_ok=True)  # the README's reports go to the git-ignored var/
    out = subprocess.run(_argv(command), cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    assert out.returncode == 0, f"{command}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"


@pytest.mark.parametrize("name,command", [c for c in ALL if kind(c[1]) == "run"], ids=lambda v: str(v)[:60])
def test_cheap_commands_run_as_written(name: str, command: str) -> None:
    _run(command, 120)


SLOW = [c for c in ALL if kind(c[1]) == "slow"]


@pytest.mark.parametrize("name,command", SLOW, ids=lambda v: str(v)[:60])
def test_cpu_evaluations_in_the_docs_name_real_options_and_files(name: str, command: str) -> None:
    """make test's look at the commands the test below runs in make test-long."""
    _checked_without_running(command)


# Each is a whole `pkb eval` or `pkb sweep` process (the docs' sweeps took 60 and 97 s of a loaded
# 2-core host): the long scenarios. make test runs the same code on the same candidate in process
# (tests/evaluator/test_cli.py, test_sweep.py's command-line sweep) and checks these lines above.
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("name,command", SLOW, ids=lambda v: str(v)[:60])
def test_cpu_evaluations_in_the_docs_run_as_written(name: str, command: str) -> None:
    _run(command, 600)
