"""Every reference runs on gloo: deterministic for a seed, different across seeds, finite, and it
leaves its inputs alone. One rank group per world size serves all problems."""

from __future__ import annotations

import pytest

import problems
from evaluator.config import Limits
from evaluator.suite import format_rows, run_world

pytestmark = pytest.mark.slow


# make test runs every reference at 2 and 4 ranks; 8 ranks, which runs the same references on
# the same code at the largest group (18 s of the file's 33), is make test-long's. Each problem's
# inputs and traffic at 8 ranks are still built in make test (test_metadata.py).
@pytest.mark.parametrize("world_size", [2, 4, pytest.param(8, marks=pytest.mark.long)])
def test_every_reference_passes_on_gloo(world_size):
    rows = run_world([], world_size, device="cpu", size="small", timed=False, profile=None,
                     limits=Limits(startup_s=120.0, step_s=60.0, total_s=120.0))
    failed = [row for row in rows if row["status"] == "FAIL"]
    assert not failed, "\n" + format_rows(failed)
    checked = {row["slug"] for row in rows if row["status"] == "ok"}
    expected = {p.slug for p in problems.all_problems() if world_size in p.world_sizes}
    assert checked == expected
