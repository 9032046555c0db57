"""End to end on the bf16 all-reduce: an fp32 accumulation passes; inputs rounded to 1/8 and fp8
on the wire, which the old atol 0.25 let through, fail with both errors against the exact sum."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaluator.api import evaluate
from evaluator.config import EvalConfig, Limits

pytestmark = pytest.mark.slow
LOSSY = Path(__file__).resolve().parent / "lossy"
# Eight ranks on a busy two-core host can take more than the deadlock tests' 8 s for a trial.
LIMITS = Limits(startup_s=120.0, step_s=60.0, total_s=300.0)


def run(name: str, world_size: int = 2, **overrides) -> dict:
    values = dict(problem="all-reduce", solution_path=LOSSY / f"{name}.py", world_size=world_size,
                  device="cpu", size="small", trials=2, seed=7, timing=False, limits=LIMITS)
    values.update(overrides)
    return dict(evaluate(EvalConfig(**values)))


def outputs(report: dict) -> list[dict]:
    return [o for t in report["trials"] for r in t["ranks"] for o in r["outputs"]]


# One timed evaluation at two ranks serves both tests below, instead of an untimed one and a
# timed one: its seeded trials are judged as an untimed run's are, and its timed calls besides.
# xdist_group: under pytest -n (make test) both run on the worker that holds it.
TIMED_AT_TWO = pytest.mark.xdist_group("lossy-fp32-timed-ws2")


@pytest.fixture(scope="module")
def fp32_timed_at_two() -> dict:
    return run("fp32_accumulate", timing=True)


@pytest.mark.parametrize("world_size", [pytest.param(2, marks=TIMED_AT_TWO), 8])
def test_an_fp32_accumulation_passes_against_the_exact_sum(world_size, request):
    report = request.getfixturevalue("fp32_timed_at_two") if world_size == 2 else run("fp32_accumulate", world_size)
    assert report["verdict"] == "pass", report["failure"]
    checks = outputs(report)
    assert checks and all(c["judged_against"] == "exact" for c in checks)
    assert all(c["candidate_err"]["rms"] <= c["reference_err"]["rms"] + 1e-12 for c in checks)


@TIMED_AT_TWO
def test_timed_calls_are_rechecked_against_the_exact_sum_too(fp32_timed_at_two):
    report = fp32_timed_at_two
    assert report["verdict"] == "pass", report["failure"]
    timed = [t for t in report["trials"] if t["kind"] == "timed"]
    assert timed and all(o["judged_against"] == "exact" for t in timed for r in t["ranks"] for o in r["outputs"])


@pytest.mark.parametrize("name", ["grid_eighth", "fp8_wire"])
def test_a_lossy_sum_fails_with_its_error_and_the_references(name):
    report = run(name)
    failure = report["failure"]
    assert failure["failure_class"] == "value_mismatch", failure
    message = failure["message"]
    assert "error against the exact answer beyond what the reference makes" in message
    cand, ref, allowed = (float(v) for v in re.search(
        r"rms ([\d.e+-]+) \(reference ([\d.e+-]+), allowed ([\d.e+-]+)\)", message).groups())
    assert cand > 3 * ref and cand > allowed
    check = outputs(report)[0]
    assert check["max_abs_err"] < 0.25  # inside the tolerance that used to judge it


def test_fp8_on_the_wire_no_longer_passes_as_an_all_reduce():
    """Security report: 'fp8 on the wire passes the bf16 all-reduce (max error 0.22 under atol 0.25)'."""
    report = run("fp8_wire", world_size=4)
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "value_mismatch"
