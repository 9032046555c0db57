from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from evaluator.api import evaluate
from evaluator.config import EvalConfig, Limits

# The deliberately broken candidates, shared with the docs and the GPU checks.
SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions" / "broken"
# Short limits keep the deadlock tests quick; real evaluations use the defaults.
TEST_LIMITS = Limits(startup_s=120.0, step_s=8.0, total_s=240.0)
# For a candidate that never finishes its first trial: no call it makes has to fit the step limit,
# so a shorter one changes no verdict, only how long the test waits for it.
HUNG_FROM_THE_START = Limits(startup_s=120.0, step_s=3.0, total_s=240.0)
# Attacks on the judge, each written as a hostile submitter would (test_judge_*.py).
HOSTILE = Path(__file__).resolve().parent / "hostile"


def run_hostile(name: str, **overrides: Any) -> dict[str, Any]:
    """One attack on all-reduce at world size 2 on CPU, two trials."""
    values: dict[str, Any] = dict(problem="all-reduce", solution_path=HOSTILE / f"{name}.py", world_size=2,
                                  device="cpu", size="small", trials=2, limits=TEST_LIMITS)
    values.update(overrides)
    return dict(evaluate(EvalConfig(**values)))


@pytest.fixture
def run_eval() -> Callable[..., tuple[dict[str, Any], float]]:
    def run(solution: str, world_size: int = 2, **overrides: Any) -> tuple[dict[str, Any], float]:
        config = EvalConfig(problem=overrides.pop("problem", "all-reduce"),
                            solution_path=SOLUTIONS / f"cpu_{solution}.py", world_size=world_size,
                            device="cpu", size="small", trials=overrides.pop("trials", 5), seed=1,
                            limits=overrides.pop("limits", TEST_LIMITS), **overrides)
        started = time.monotonic()
        report = evaluate(config)
        return dict(report), time.monotonic() - started
    return run


class SharedEvaluations:
    """run_eval's evaluations (the same arguments, with ``seed`` free as well), each run once per
    pytest process and read by every test that asks for the same one: a test reads its own copy
    of the report, the seconds the evaluation took, and the progress events it sent.

    Under pytest -n (make test) only tests on one worker share a run: those that read the same
    one carry the same ``shared`` mark below, an xdist_group."""

    def __init__(self) -> None:
        self._runs: dict[str, tuple[dict[str, Any], float, list[tuple[str, Any, Any]]]] = {}

    def _run(self, solution: str, world_size: int, overrides: dict[str, Any]) -> tuple[dict[str, Any], float, list]:
        key = repr((solution, world_size, sorted(overrides.items())))
        if key not in self._runs:
            values = dict(problem="all-reduce", solution_path=SOLUTIONS / f"cpu_{solution}.py",
                          world_size=world_size, device="cpu", size="small", trials=5, seed=1,
                          limits=TEST_LIMITS)
            values.update(overrides)
            seen: list[tuple[str, Any, Any]] = []
            started = time.monotonic()
            report = evaluate(EvalConfig(**values),
                              on_progress=lambda side, event: seen.append((side, event["event"], event["step"])))
            self._runs[key] = (dict(report), time.monotonic() - started, seen)
        return self._runs[key]

    def __call__(self, solution: str, world_size: int = 2, **overrides: Any) -> tuple[dict[str, Any], float]:
        report, seconds, _ = self._run(solution, world_size, overrides)
        return copy.deepcopy(report), seconds

    def progress(self, solution: str, world_size: int = 2, **overrides: Any) -> list[tuple[str, Any, Any]]:
        return list(self._run(solution, world_size, overrides)[2])


@pytest.fixture(scope="session")
def shared_eval() -> SharedEvaluations:
    return SharedEvaluations()


def shared(name: str) -> Any:
    """The mark of the tests that read the shared evaluations called ``name`` (an xdist_group)."""
    return pytest.mark.xdist_group(f"shared-eval-{name}")
