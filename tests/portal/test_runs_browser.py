"""Headless Chromium: a run page (matrix, scores, its fast_p curve beside another run's) and
the comparison of two runs render their charts without console errors."""

from __future__ import annotations

from typing import Any

import pytest

from portal.runs import services
from portal.runs.models import Run

from .conftest import VALID_SOURCE
from .runs_helpers import finish, load_problems
from . import test_browser

browser, page = test_browser.browser, test_browser.page  # the shared Chromium fixtures

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.slow]


def _finished_run(owner: Any, hardware: Any, model: str, report: dict[str, Any],
                  outcomes: dict[str, list[tuple[bool, float]]]) -> Run:
    run = services.create_run(user=owner, data={"model": model, "hardware": hardware.slug,
                                                "k": 2, "backend": "cuda"})
    plans = [services.FilePlan(name=f"{p}/{i}.py", problem=p, source=VALID_SOURCE.encode())
             for p, tries in outcomes.items() for i in range(len(tries))]
    rows = services.add_files(run, plans, user=owner)
    flat = [t for tries in outcomes.values() for t in tries]
    for row, (ok, speedup) in zip(rows, flat):
        finish(row.submission, report, correct=ok, speedup=speedup, low=speedup * 0.95,
               high=speedup * 1.05)
    return run


@pytest.mark.django_db(transaction=True)
def test_run_page_and_run_comparison_draw_their_charts(
        live_server: Any, page: Any, owner: Any, cpu_hardware: Any, all_reduce: Any,
        real_report: dict[str, Any], no_dispatch: list[int]) -> None:
    load_problems(["all-gather", "reduce-scatter"])
    first = _finished_run(owner, cpu_hardware, "model-a", real_report, {
        "all-reduce": [(True, 1.6), (False, 0.0)], "all-gather": [(True, 0.8), (True, 1.2)],
        "reduce-scatter": [(False, 0.0), (False, 0.0)]})
    second = _finished_run(owner, cpu_hardware, "model-b", real_report, {
        "all-reduce": [(True, 2.5), (True, 2.2)], "all-gather": [(False, 0.0), (True, 1.1)]})
    assert len(no_dispatch) == 10

    page.goto(f"{live_server.url}/runs/{first.pk}/")
    page.wait_for_selector("#chart-run-fastp .main-svg", timeout=15_000)
    assert page.locator("#chart-run-fastp .scatterlayer .trace").count() == 2  # this run and the other
    assert page.locator("#matrix tbody tr").count() == 3
    assert page.locator("#matrix td.v-fast").count() == 2  # 1.6x and 1.2x (lower ends above 1)
    assert page.locator("#matrix td.v-value_mismatch").count() == 3
    assert page.locator("#run-state").inner_text() == "done"
    scores = page.locator("table.data").nth(1).inner_text()
    assert "pass@2" in scores and "fast_1.5" in scores

    page.goto(f"{live_server.url}/runs/compare/?runs={first.pk}&runs={second.pk}")
    for chart in ("fastp", "scatter", "categories", "failures"):
        page.wait_for_selector(f"#chart-{chart} .main-svg", timeout=15_000)
    # each run's curve, and its markers with the 95% error bars at p = 0, 0.5, 1, 1.5, 2, 3
    assert page.locator("#chart-fastp .scatterlayer .trace").count() == 4
    page.wait_for_selector("#chart-differences .main-svg", timeout=15_000)
    assert "not distinguishable on these 3 problems" in page.locator("#difference-words").inner_text()
    assert f"run {second.pk}: model-b" in page.content()
    page.goto(f"{live_server.url}/leaderboard/?hardware={cpu_hardware.slug}")
    page.wait_for_selector("table.data")
    assert page.locator(f"a[href='/runs/{first.pk}/']").count() == 1
    assert page.errors == []


@pytest.mark.django_db(transaction=True)
def test_a_run_page_follows_its_pending_samples(
        live_server: Any, page: Any, owner: Any, cpu_hardware: Any, all_reduce: Any,
        real_report: dict[str, Any], no_dispatch: list[int]) -> None:
    run = services.create_run(user=owner, data={"model": "pending-model", "hardware": cpu_hardware.slug,
                                                "k": 1, "backend": "torch"})
    [row] = services.add_files(run, [services.FilePlan(name="a.py", problem="all-reduce",
                                                       source=VALID_SOURCE.encode())], user=owner)
    # The page asks for the run's progress every 5 s: the test moves the page's clock past that
    # instead of waiting it out (the poll, its request and the reload are the page's own).
    page.clock.install()
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator("#run-state").inner_text() == "evaluating"
    assert page.locator("#matrix td.v-pending").count() == 1
    finish(row.submission, real_report, correct=True, speedup=1.3, low=1.2, high=1.4)
    page.clock.fast_forward(5_000)
    page.wait_for_selector("#run-state:text-is('done')", timeout=20_000)  # it reloaded itself
    assert page.locator("#matrix td.v-fast").count() == 1
    assert page.errors == []
