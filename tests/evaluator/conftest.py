from __future__ import annotations

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
