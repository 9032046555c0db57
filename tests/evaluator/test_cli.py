"""`pkb` answers bad arguments with exit status 2 and a line that says what to do."""

from __future__ import annotations

import json

import pytest

from evaluator.cli import main

from .conftest import SOLUTIONS

CORRECT = str(SOLUTIONS / "cpu_correct.py")


@pytest.mark.parametrize("argv, words", [
    (["--problem", "nope", "--solution", CORRECT, "--world-size", "2"], "unknown problem 'nope'; `pkb problems` lists them"),
    (["--problem", "tp-summa-2d-linear", "--solution", CORRECT, "--world-size", "2"], "supports world sizes [4, 8], not 2 (SUMMA"),
    (["--problem", "all-reduce", "--solution", "/no/such/file.py", "--world-size", "2"], "solution file /no/such/file.py does not exist"),
    (["--problem", "all-reduce", "--solution", CORRECT, "--world-size", "2", "--dtype", "float64"], "unknown dtype 'float64'"),
    (["--problem", "all-reduce", "--solution", CORRECT, "--world-size", "2", "--size", "huge"], "size presets ['default', 'small'], not 'huge'"),
    (["--problem", "all-reduce", "--solution", CORRECT, "--world-size", "2", "--trials", "0"], "--trials must be at least 1"),
])
def test_bad_arguments_exit_2_with_a_clear_message(argv, words, capsys):
    assert main(["eval", *argv]) == 2
    assert words in capsys.readouterr().err


def test_problems_summary_counts_every_category(capsys):
    assert main(["problems", "--summary"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith("problems")
    assert "per collective used:" in out and "  expert " in out


def test_eval_writes_the_report_it_summarises(tmp_path, capsys):
    out = tmp_path / "report.json"
    assert main(["eval", "--problem", "all-reduce", "--solution", CORRECT, "--world-size", "2",
                 "--size", "small", "--trials", "2", "--no-timing", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["verdict"] == "pass" and report["timing"] is None
    assert "verdict: PASS" in capsys.readouterr().out


def test_eval_hands_the_report_over_an_inherited_pipe(capsys):
    import os

    read, write = os.pipe()
    assert main(["eval", "--problem", "all-reduce", "--solution", CORRECT, "--world-size", "2",
                 "--size", "small", "--trials", "1", "--no-timing", "--report-fd", str(write)]) == 0
    with os.fdopen(read, "rb") as pipe:  # `pkb eval` closed its end: the read ends
        report = json.loads(pipe.read())
    assert report["verdict"] == "pass" and report["sandbox"] in ("on", "off")
