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


def timed_report(rounds: int, low: float, high: float) -> dict:
    """What render_summary reads of a CPU report timed over ``rounds`` alternating rounds."""
    return {"problem": {"slug": "all-reduce"}, "verdict": "pass", "failure": None, "trials": [],
            "setting": {"world_size": 2, "device": "cpu", "backend": "gloo", "dtype": "bfloat16", "size": "small"},
            "timing": {"device": "cpu", "speedup": 1.381, "candidate": {"median_ms": 0.2},
                       "reference": {"median_ms": 0.28},
                       "interval": {"low": low, "high": high, "level": 0.95, "method": "bootstrap"},
                       "stop": {"reason": "time_cap", "rounds": rounds, "seconds": 6.2, "half_width": 0.0,
                                "target_half_width": 0.01},
                       "block_calls": {"candidate": 10, "reference": 10}, "clocks": None, "roofline": None},
            "wall_time": {"total_s": 9.0, "candidate_s": 4.0, "reference_s": 4.0}}


def test_a_single_round_is_not_printed_as_an_interval():
    from evaluator.cli import render_summary

    text = render_summary(timed_report(1, 1.381, 1.381))
    assert "[1.381, 1.381]" not in text and "95% interval [" not in text
    assert "no interval (1 round; a 95% interval needs at least 6): 1 alternating round of 10 calls" in text
    assert "no interval (5 rounds;" in render_summary(timed_report(5, 0.9, 1.6))


def test_enough_rounds_print_the_interval_in_brackets():
    from evaluator.cli import render_summary

    text = render_summary(timed_report(6, 1.17, 1.21))
    assert "95% interval [1.170, 1.210] over 6 alternating rounds of 10 calls; stopped: time_cap" in text
    assert "no interval" not in text


def test_the_dtype_on_the_command_line_is_the_evaluations(monkeypatch, capsys, tmp_path):
    # What reaches evaluate(): tests/problems/test_pkb_bf16.py then runs those configs in-process.
    seen = []

    def evaluate(config, progress=None):
        seen.append(config)
        raise SystemExit(0)

    monkeypatch.setattr("evaluator.api.evaluate", evaluate)
    with pytest.raises(SystemExit):
        main(["eval", "--problem", "ddp-training-step", "--solution", CORRECT, "--world-size", "2",
              "--dtype", "bfloat16", "--size", "small", "--no-timing"])
    assert [(c.problem, c.dtype, c.size, c.timing) for c in seen] == [("ddp-training-step", "bfloat16", "small", False)]


def test_a_candidate_message_no_encoding_can_write_is_printed_escaped(tmp_path):
    """Through a real pipe (UTF-8, strict): the summary quotes the candidate's exception, and a
    lone surrogate there made `pkb eval` print "error" and exit 2 after its report said fail."""
    import os
    import subprocess
    import sys

    solution = tmp_path / "surrogate.py"
    solution.write_text('def solution(x, *, group):\n    raise RuntimeError("bad \\ud800 text")\n')
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "evaluator.cli", "eval", "--problem", "all-reduce",
                           "--solution", str(solution), "--world-size", "2", "--size", "small",
                           "--trials", "2", "--no-timing", "--json", str(out)],
                          capture_output=True, timeout=300, env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]  # 0: a verdict was reached
    assert json.loads(out.read_text())["failure"]["failure_class"] == "runtime_error"
    assert "verdict: FAIL" in done.stdout.decode() and "\\ud800" in done.stdout.decode()


def test_a_progress_line_inside_a_candidates_message_is_no_step_to_the_worker(tmp_path):
    """The worker reads `pkb eval --progress` with stdout and stderr on one pipe; the summary on
    stdout quotes the candidate's exception, so a line of its own there was a progress step (a
    submission's page could show a step the evaluation never took)."""
    import subprocess
    import sys

    from contract.progress import parse_line

    solution = tmp_path / "forges_a_step.py"
    solution.write_text('def solution(x, *, group):\n    raise RuntimeError(\n'
                        '        "oops\\nPKB-PROGRESS {\\"side\\": \\"candidate\\", \\"event\\": \\"step\\", '
                        '\\"step\\": \\"trial 99\\", \\"task\\": 0}")\n')
    done = subprocess.run([sys.executable, "-m", "evaluator.cli", "eval", "--problem", "all-reduce",
                           "--solution", str(solution), "--world-size", "2", "--size", "small",
                           "--trials", "1", "--no-timing", "--progress"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    output = done.stdout.decode(errors="replace")
    assert done.returncode == 0 and "verdict: FAIL" in output, output[-2000:]
    assert "trial 99" in output  # the message is printed, quoted
    steps = [event.get("step") for line in output.splitlines() if (event := parse_line(line))]
    assert steps and "trial 99" not in steps, steps
