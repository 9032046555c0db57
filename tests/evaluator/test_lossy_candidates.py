"""End to end on the bf16 all-reduce: an fp32 accumulation passes; inputs rounded to 1/8 and fp8
on the wire, which the old atol 0.25 let through, fail with both errors against the exact sum."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest

from evaluator import api
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


# World size 8 is make test-long's (an evaluation of 8 ranks a side, 12 s of the loaded 2-core host):
# make test keeps the same candidate and judge at 2 ranks (and the exact-judging suite's fp32
# accumulation at 2 and 4 ranks, tests/evaluator/test_exact_judging.py).
@pytest.mark.parametrize("world_size", [pytest.param(2, marks=TIMED_AT_TWO), pytest.param(8, marks=pytest.mark.long)])
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


class PinnedSalts:
    """``secrets`` as evaluator.api reads it, but for the per-rank input salts and the seeds'
    secret: fixed ones.

    Every other draw (the channel token, seeds when none is given) stays the real module's."""

    def __init__(self) -> None:
        self.drawn = 0

    def token_hex(self, nbytes: int | None = None) -> str:
        self.drawn += 1
        return f"{self.drawn:016x}"

    def __getattr__(self, name: str):
        return getattr(secrets, name)


@pytest.mark.parametrize("name", ["grid_eighth", "fp8_wire"])
def test_a_lossy_sum_fails_with_its_error_and_the_references(name, monkeypatch):
    # The inputs are pinned: the seed is, and the per-rank salts the evaluation would draw at
    # random are fixed here. With a fresh salt per run, fp8_wire's largest error was a new draw
    # each time, and about 1 run in 27 it came out at 0.25 or more (an input of |x| >= 4, where
    # fp8 e4m3 steps by 0.5, or two roundings of 0.125 adding up; the errors are differences of
    # bf16 and fp8 values, so exactly 0.25 comes up), failing the check below, which holds for
    # most inputs but not all. On the pinned inputs the error is 0.172: the check is a fact about
    # them, the same in every run. The verdict never depended on the draw (its rms error was 14 to
    # 15 times the reference's over 1,000 fresh salts). A change to how inputs are made moves the
    # pinned error; if it ever lands at 0.25 or above, pin other salts.
    pinned = PinnedSalts()
    monkeypatch.setattr(api, "secrets", pinned)
    report = run(name)
    # One salt per rank and the secret every input's seed is mixed with (judge/inputs.py
    # secret_seed), all pinned: no input was a random draw.
    assert pinned.drawn == 3
    failure = report["failure"]
    assert failure["failure_class"] == "value_mismatch", failure
    message = failure["message"]
    assert "error against the exact answer beyond what the reference makes" in message
    cand, ref, allowed = (float(v) for v in re.search(
        r"rms ([\d.e+-]+) \(reference ([\d.e+-]+), allowed ([\d.e+-]+)\)", message).groups())
    assert cand > 3 * ref and cand > allowed
    check = outputs(report)[0]
    assert check["max_abs_err"] < 0.25, check  # inside the tolerance that used to judge it


# make test-long's (an evaluation at 4 ranks a side): make test keeps the same candidate failing
# the same way at 2 ranks, with its errors checked (test_a_lossy_sum_fails_..._references[fp8_wire]).
@pytest.mark.long
def test_fp8_on_the_wire_no_longer_passes_as_an_all_reduce():
    """Security report: 'fp8 on the wire passes the bf16 all-reduce (max error 0.22 under atol 0.25)'."""
    report = run("fp8_wire", world_size=4)
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "value_mismatch"
