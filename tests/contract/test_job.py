"""The job as the portal sends it and the worker runs it: one shape, checked where it arrives,
with a deadline that reaches the evaluator inside the worker's own kill."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.callbacks import (REPORT_ROUTE, STATUS_ROUTE, SWEEP_ROUTE, report_url, status_url, submission_url,
                                sweep_url)
from contract.job import DEADLINE_MARGIN_S, EvalJob, JobError, sweep_follows
from contract.progress import format_line, parse_line

PAYLOAD = {"submission_id": 7, "problem": "all-reduce", "problem_version": "v1", "source": "x = 1\n",
           "world_size": 2, "device": "cuda", "size": "default", "dtype": "bfloat16", "trials": 5,
           "hardware_profile": "h200-x2-nvlink", "timeout_s": 900, "token": "secret",
           "callback_url": "https://pkb.example.org/api/v1/worker/submissions/7/"}


def test_a_payload_round_trips():
    assert EvalJob.from_payload(PAYLOAD).to_payload() == {**PAYLOAD, "timeout_s": 900.0, "sweep": False,
                                                           "sweep_sizes": None, "sweep_timeout_s": 0.0,
                                                           "sweep_base": None}


def test_optional_fields_may_be_null_or_absent():
    payload = {**PAYLOAD, "dtype": None, "hardware_profile": None}
    assert EvalJob.from_payload(payload).to_payload() == {**payload, "timeout_s": 900.0, "sweep": False,
                                                          "sweep_sizes": None, "sweep_timeout_s": 0.0,
                                                          "sweep_base": None}
    assert EvalJob.from_payload({**payload, "sweep": None, "sweep_sizes": None}).sweep is False


def test_a_sweep_request_round_trips_and_becomes_a_pkb_sweep_command():
    payload = {**PAYLOAD, "sweep": True, "sweep_sizes": [4096, 65536], "sweep_timeout_s": 1800, "sweep_base": "small"}
    job = EvalJob.from_payload(payload)
    assert job.to_payload() == {**payload, "timeout_s": 900.0, "sweep_timeout_s": 1800.0}
    command = job.sweep_command(["pkb"], Path("/w/solution.py"), 6, worker_limit_s=3600, extra=("--no-sandbox",))
    assert command[:2] == ["pkb", "sweep"] and command[-1] == "--no-sandbox"
    assert command[command.index("--sizes") + 1:command.index("--sizes") + 3] == ["4096", "65536"]
    assert command[command.index("--base") + 1] == "small"
    assert command[command.index("--deadline") + 1] == f"{1800 - DEADLINE_MARGIN_S:.0f}"
    assert command[command.index("--report-fd") + 1] == "6"


def test_only_a_passing_evaluation_is_swept():
    assert sweep_follows({"verdict": "pass"}) and not sweep_follows({"verdict": "fail"})


@pytest.mark.parametrize("change, words", [
    ({"problem": None}, "lacks problem"),
    ({"device": "tpu"}, "device must be cpu or cuda"),
    ({"world_size": "two"}, "wrong type"),
    ({"trials": 0}, "must be positive"),
    ({"sweep": True}, "needs a positive sweep_timeout_s"),
    ({"sweep": True, "sweep_timeout_s": 60, "sweep_sizes": [4096, 0]}, "sweep_sizes must be positive"),
    ({"sweep": True, "sweep_timeout_s": 60, "sweep_sizes": ["4K"]}, "wrong type"),
])
def test_a_bad_payload_says_what_is_wrong(change, words):
    with pytest.raises(JobError, match=words):
        EvalJob.from_payload({**PAYLOAD, **change})


def test_the_evaluator_gets_a_deadline_inside_the_workers_kill():
    job = EvalJob.from_payload(PAYLOAD)
    command = job.command(["pkb"], Path("/w/solution.py"), 5, worker_limit_s=600)
    assert command[command.index("--deadline") + 1] == f"{600 - DEADLINE_MARGIN_S:.0f}"
    assert command[command.index("--report-fd") + 1] == "5"
    assert ["--dtype", "bfloat16"] == command[command.index("--dtype"):command.index("--dtype") + 2]
    assert job.deadline_s(worker_limit_s=3600) == 900 - DEADLINE_MARGIN_S  # the portal's limit is lower


def test_callback_urls_match_the_routes_the_portal_serves():
    base = submission_url("https://pkb.example.org/", 7)
    assert base == PAYLOAD["callback_url"]
    assert status_url(base).endswith("/api/v1/" + STATUS_ROUTE.replace("<int:pk>", "7"))
    assert report_url(base).endswith("/api/v1/" + REPORT_ROUTE.replace("<int:pk>", "7"))
    assert sweep_url(base).endswith("/api/v1/" + SWEEP_ROUTE.replace("<int:pk>", "7"))


def test_progress_lines_round_trip():
    line = format_line("reference", {"event": "step", "step": "trial 1", "task": 0})
    assert parse_line(line) == {"side": "reference", "event": "step", "step": "trial 1", "task": 0}
    assert parse_line(format_line("nobody", {"event": "done"})) is None
