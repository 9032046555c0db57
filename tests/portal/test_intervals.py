"""95% intervals over problems for fast_p, pass@k and fast_1@k, and paired differences between
models (definitions: docs/portal.md, "Intervals over problems"): the functions on hand-made
values with known answers, then where a reader sees them (board, comparison, API, run scores,
the `pkb` client)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest

from portal.leaderboards import metrics
from portal.leaderboards.metrics import (BOOTSTRAP, WILSON, Attempt, bootstrap_interval, mean_interval,
                                         metric_keys, metric_values, paired_bootstrap_interval,
                                         mcnemar_exact_p, paired_differences, score_model,
                                         wilson_interval)

from .conftest import a_result
from .test_browser import browser, page  # noqa: F401  (the shared headless Chromium fixtures)

# -- the interval functions -------------------------------------------------------------------


def test_wilson_matches_the_textbook_values() -> None:
    # 5 of 10: centre 0.5, half-width z * sqrt(0.025 + z^2/400) / (1 + z^2/10) = 0.2634
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    # 0 of n: [0, z^2 / (n + z^2)]; n of n: [n / (n + z^2), 1]. Not a point: 0 of 40 is no proof of 0.
    zz = metrics.Z95 ** 2
    assert wilson_interval(0, 40) == pytest.approx((0.0, zz / (40 + zz)))
    assert wilson_interval(40, 40) == pytest.approx((40 / (40 + zz), 1.0))
    assert wilson_interval(40, 40)[1] == 1.0 and wilson_interval(0, 40)[0] == 0.0  # exactly
    assert wilson_interval(0, 0) is None


def test_the_bootstrap_of_all_solved_is_one_and_of_none_is_zero() -> None:
    assert bootstrap_interval([1.0] * 40) == (1.0, 1.0)
    assert bootstrap_interval([0.0] * 40) == (0.0, 0.0)
    assert bootstrap_interval([0.5] * 7) == (0.5, 0.5)
    assert bootstrap_interval([]) is None


def test_the_bootstrap_on_a_case_computed_by_hand() -> None:
    # Four problems scoring 1, 1, 1, 0: a resample's mean is (ones drawn) / 4, ones ~ Binomial(4, 3/4).
    # P(mean 0) = 1/256, P(mean <= 0.25) = 13/256 = 5.1%: the 2.5% point is 0.25. P(mean 1) =
    # 81/256 = 32%: the 97.5% point is 1.
    assert bootstrap_interval([1.0, 1.0, 1.0, 0.0]) == (0.25, 1.0)
    # Two problems, 0 and 1: means 0, 0.5, 1 with 1/4, 1/2, 1/4: the interval is [0, 1].
    assert bootstrap_interval([0.0, 1.0]) == (0.0, 1.0)


def test_the_bootstrap_is_the_same_on_every_call_and_in_a_fresh_process() -> None:
    values = [0.0, 1 / 3, 2 / 3, 1.0, 0.5, 0.25, 0.0, 1.0] * 6
    first = bootstrap_interval(values)
    assert first == bootstrap_interval(values) == bootstrap_interval(list(values))
    code = ("import json, sys; from portal.leaderboards.metrics import bootstrap_interval; "
            "print(json.dumps(bootstrap_interval(json.loads(sys.argv[1]))))")
    fresh = subprocess.run([sys.executable, "-c", code, json.dumps(values)], capture_output=True,
                           text=True, check=True).stdout
    assert tuple(json.loads(fresh)) == first
    # the seed is what fixes it: another seed moves the ends a little, never the mean inside them
    other = bootstrap_interval(values, seed=1)
    mean = sum(values) / len(values)
    assert other[0] <= mean <= other[1] and first[0] <= mean <= first[1]


def test_a_share_gets_wilson_and_a_mean_of_fractions_the_bootstrap() -> None:
    share = mean_interval([1.0] * 12 + [0.0] * 28)
    assert share is not None and share.method == WILSON
    assert (share.low, share.high) == wilson_interval(12, 40)
    fractions = mean_interval([2 / 3] * 10 + [0.0] * 30)
    assert fractions is not None and fractions.method == BOOTSTRAP
    assert fractions.low < 10 * (2 / 3) / 40 < fractions.high
    assert mean_interval([]) is None


def test_a_paired_difference_of_identical_models_is_zero_and_not_distinguishable() -> None:
    a = [1.0] * 10 + [0.0] * 30
    assert paired_bootstrap_interval(a, a) == (0.0, 0.0)
    assert paired_bootstrap_interval([1.0] * 40, [0.0] * 40) == (1.0, 1.0)
    assert paired_bootstrap_interval([1.0, 0.0], [0.0, 0.0]) == (0.0, 1.0)  # diffs 1, 0: by hand as above
    with pytest.raises(ValueError):
        paired_bootstrap_interval([1.0], [1.0, 0.0])


def test_pairing_tells_apart_what_two_separate_intervals_cannot() -> None:
    # b solves 16 of 40; a solves the same 16 and 8 more. Alone, their Wilson intervals overlap
    # (0.60 [0.45, 0.74] and 0.40 [0.26, 0.55]); paired, the 24 problems they agree on cancel and
    # the difference, 8 of 40 problems, is clear of 0 (a resample with none of the 8: 0.8^40).
    b = [1.0] * 16 + [0.0] * 24
    a = [1.0] * 24 + [0.0] * 16
    wa, wb = wilson_interval(24, 40), wilson_interval(16, 40)
    assert wa is not None and wb is not None and wa[0] < wb[1]
    low, high = paired_bootstrap_interval(a, b)
    assert 0.0 < low < 0.2 < high




def test_mcnemars_exact_p_value_on_values_worked_out_by_hand() -> None:
    # Of m problems that differ, a alone solved s: 2 x P(Bin(m, 1/2) <= min(s, m - s)), at most 1.
    assert mcnemar_exact_p(5, 0) == 2 / 32 and mcnemar_exact_p(6, 0) == 2 / 64
    assert mcnemar_exact_p(4, 0) == 0.125 and mcnemar_exact_p(0, 4) == 0.125
    assert mcnemar_exact_p(7, 4) == min(1.0, 2 * sum(math.comb(11, k) for k in range(5)) / 2 ** 11)
    assert mcnemar_exact_p(3, 3) == 1.0 and mcnemar_exact_p(0, 0) == 1.0


def test_a_share_of_problems_is_told_apart_by_the_exact_test_not_the_narrow_bootstrap() -> None:
    # 40 problems, 10 solved by both; a alone solves ``only_a``, b alone ``only_b``. The paired
    # bootstrap's interval left out 0 from 4 of a alone (p = 0.125): the exact test decides.
    slugs = sorted(PROBLEMS)
    for only_a, only_b, apart in ((4, 0, False), (5, 0, False), (6, 0, True), (7, 1, False), (8, 1, True), (7, 4, False)):
        a_solves = slugs[:10 + only_a]
        b_solves = slugs[:10] + slugs[10 + only_a:10 + only_a + only_b]
        a = score_model("a", [ran("a", slug, True, 1.5) for slug in a_solves], PROBLEMS, intervals=True)
        b = score_model("b", [ran("b", slug, True, 1.5) for slug in b_solves], PROBLEMS, intervals=True)
        fast_1 = paired_differences(a, b, slugs)["fast_1"]
        assert fast_1.difference == pytest.approx((only_a - only_b) / 40)
        assert fast_1.p_value == mcnemar_exact_p(only_a, only_b) and fast_1.method == metrics.EXACT
        assert fast_1.distinguishable is apart, (only_a, only_b)
        if (only_a, only_b) == (4, 0):
            assert fast_1.low > 0  # the bootstrap alone would have called it
    # A mean of fractional estimates has no exact test here: its interval decides.
    halves = [ran("h", slug, True, 1.5) for slug in slugs] + [ran("h", slug, False) for slug in slugs]
    h = score_model("h", halves, PROBLEMS, intervals=True)
    none = score_model("z", [], PROBLEMS, intervals=True)
    pass_1 = paired_differences(h, none, slugs)["pass_at_1"]
    assert pass_1.p_value is None and pass_1.method == BOOTSTRAP
    assert pass_1.distinguishable == (not pass_1.low <= 0 <= pass_1.high) is True

PROBLEMS = {f"p{i:02d}": ["tensor"] for i in range(40)}


def ran(model: str, problem: str, correct: bool, low: float | None = None) -> Attempt:
    return Attempt(model=model, problem=problem, correct=correct, speedup=low, speedup_low=low,
                   speedup_high=None if low is None else low + 0.1)


def test_each_metric_is_the_mean_of_its_per_problem_values_and_lies_in_its_interval() -> None:
    attempts = []
    for i, slug in enumerate(PROBLEMS):
        if i < 10:  # solved fast on both tries
            attempts += [ran("m", slug, True, 1.6), ran("m", slug, True, 1.2)]
        elif i < 20:  # one of two tries right, slower than the reference
            attempts += [ran("m", slug, True, 0.7), ran("m", slug, False)]
        elif i < 25:
            attempts += [ran("m", slug, False)]
    s = score_model("m", attempts, PROBLEMS, intervals=True)
    values = metric_values(s, sorted(PROBLEMS))
    shares = {metrics.fast_key(p): s.fast_p[p] for p in metrics.FAST_P}
    shares.update({f"pass_at_{k}": s.pass_at[k] for k in metrics.KS})
    shares.update({f"fast_1_at_{k}": s.fast1_at[k] for k in metrics.KS})
    assert list(values) == metric_keys() == list(s.intervals)
    for key, share in shares.items():
        assert sum(values[key]) / 40 == pytest.approx(share), key
        assert s.intervals[key].low <= share <= s.intervals[key].high, key
    assert s.fast_p[1.0] == 0.25 and s.intervals["fast_1"].method == WILSON
    assert (s.intervals["fast_1"].low, s.intervals["fast_1"].high) == wilson_interval(10, 40)
    assert s.pass_at[1] == pytest.approx((10 + 10 * 0.5) / 40)
    assert s.intervals["pass_at_1"].method == BOOTSTRAP  # ten problems at 1/2
    assert s.intervals["fast_3"].low == 0.0 and s.intervals["fast_3"].high > 0.05  # 0 of 40 is not "exactly 0"
    assert score_model("m", attempts, PROBLEMS).intervals == {}  # only when asked: the runs list scores 200


def test_paired_differences_say_in_words_who_is_ahead_or_that_they_cannot_be_told_apart() -> None:
    slugs = sorted(PROBLEMS)
    a = score_model("a", [ran("a", slug, True, 1.5) for slug in slugs[:24]], PROBLEMS, intervals=True)
    b = score_model("b", [ran("b", slug, True, 1.5) for slug in slugs[:16]]
                    + [ran("b", slug, True, 2.5) for slug in slugs[16:17]], PROBLEMS, intervals=True)
    diffs = paired_differences(a, b, slugs)
    assert list(diffs) == metric_keys()
    fast_1 = diffs["fast_1"]
    assert (fast_1.a, fast_1.b, fast_1.difference, fast_1.problems) == (0.6, 0.425, 0.175, 40)
    assert fast_1.distinguishable and fast_1.low > 0
    assert metrics.difference_words(fast_1, "a", "b") == "a ahead of b on these 40 problems"
    fast_2 = diffs["fast_2"]  # b alone clears 2x, on one problem: 1 of 40 is no evidence
    assert fast_2.difference == -0.025 and not fast_2.distinguishable
    assert metrics.difference_words(fast_2, "a", "b") == "not distinguishable on these 40 problems"
    same = paired_differences(a, a, slugs)
    assert all(not d.distinguishable and (d.low, d.high) == (0.0, 0.0) for d in same.values())
    assert fast_1.method == metrics.EXACT and fast_1.p_value == mcnemar_exact_p(7, 0)


def test_metric_labels() -> None:
    assert [metrics.metric_label(k) for k in metric_keys()] == [
        "fast_0", "fast_0.5", "fast_1", "fast_1.5", "fast_2", "fast_3", "pass@1", "pass@3",
        "fast_1@1", "fast_1@3"]


# -- where a reader sees them ----------------------------------------------------------------


@pytest.fixture
def board(db: None, owner: Any, gpu_hardware: Any) -> dict[str, Any]:
    """Ten problems on the GPU profile. ``ahead`` solves 8 of them at 1.5x; ``behind`` the same
    first 2 at 1.5x and nothing else; ``twin`` exactly what ``behind`` does. Six problems that
    ahead alone solves are the fewest that tell two models apart (McNemar: p = 0.031; five,
    0.0625)."""
    from portal.catalog.models import Problem, ProblemVersion

    problems = []
    for i in range(10):
        p = Problem.objects.create(number=9100 + i, slug=f"interval-{i}", title=f"Interval {i}",
                                   world_sizes=[2, 4])
        ProblemVersion.objects.create(problem=p, version=f"{i:016d}", is_current=True, title=p.title,
                                      source_text="def reference(x, *, group):\n    return x\n",
                                      signature="def solution(x, *, group):", details={})
        problems.append(p)
    for i, p in enumerate(problems):
        if i < 8:
            a_result(owner, "ahead", gpu_hardware, p, speedup=1.5)
        if i < 2:
            a_result(owner, "behind", gpu_hardware, p, speedup=1.5)
            a_result(owner, "twin", gpu_hardware, p, speedup=1.5)
        else:
            a_result(owner, "behind", gpu_hardware, p, speedup=None, correct=False)
    return {"hardware": gpu_hardware, "problems": problems}


@pytest.mark.django_db
def test_the_model_board_api_gives_each_share_with_its_interval(anonymous_api: Any, board: dict[str, Any]) -> None:
    body = anonymous_api.get("/api/v1/leaderboards/models/", {"hardware": board["hardware"].slug}).json()
    assert body["intervals"]["level"] == 0.95 and body["intervals"]["fast_p"] == "wilson"
    rows = {r["model"]: r for r in body["models"]}
    n = body["problems"]
    ahead = rows["ahead"]
    assert (ahead["fast_1"], ahead["problems"]) == (8 / n, n)
    assert (ahead["fast_1_low"], ahead["fast_1_high"]) == pytest.approx(wilson_interval(8, n))
    for key in metric_keys():  # the old field stays, the ends beside it
        assert ahead[f"{key}_low"] <= ahead[key] <= ahead[f"{key}_high"], key
    assert rows["behind"]["pass_at_1"] == 2 / n  # two of ten tries right, one try a problem
    csv = anonymous_api.get("/leaderboard/", {"hardware": board["hardware"].slug, "export": "csv"})
    assert "fast_1_low" in csv.content.decode().splitlines()[0]


@pytest.mark.django_db
def test_the_model_board_page_shows_each_interval_under_its_share(client: Any, board: dict[str, Any]) -> None:
    page = client.get("/leaderboard/", {"hardware": board["hardware"].slug}).content.decode()
    n = len(metrics_problems(board))
    low, high = wilson_interval(8, n)
    assert f'<span class="interval">[{100 * low:.0f}–{100 * high:.0f}]</span>' in page
    assert f"95% interval over the {n} problems: {100 * low:.1f}% to {100 * high:.1f}% (Wilson score interval)" in page


def metrics_problems(board: dict[str, Any]) -> list[str]:
    from portal.leaderboards.services import problem_set

    return sorted(problem_set(board["hardware"]))


@pytest.mark.django_db
def test_the_compare_api_gives_paired_differences_in_numbers_and_words(anonymous_api: Any,
                                                                      board: dict[str, Any]) -> None:
    body = anonymous_api.get("/api/v1/compare/", {"hardware": board["hardware"].slug,
                                                  "models": "ahead,behind,twin"}).json()
    n = body["problems"]
    pairs = {(p["a"], p["b"]): p for p in body["differences"]}
    assert set(pairs) == {("ahead", "behind"), ("ahead", "twin"), ("behind", "twin")}
    fast_1 = pairs[("ahead", "behind")]["metrics"]["fast_1"]
    assert fast_1["difference"] == pytest.approx(6 / n) and fast_1["low"] > 0 and fast_1["distinguishable"]
    assert fast_1["method"] == metrics.EXACT and fast_1["p_value"] == 2 / 64
    assert fast_1["words"] == f"ahead ahead of behind on these {n} problems"
    twins = pairs[("behind", "twin")]
    assert all(m["difference"] == 0 and not m["distinguishable"] for m in twins["metrics"].values())
    assert twins["summary"] == (f"behind and twin are not distinguishable on these {n} problems: no "
                                "difference passes its test (McNemar's exact test for shares of problems, "
                                "else the 95% interval holds 0).")
    assert "not distinguishable on these" in pairs[("ahead", "behind")]["summary"]  # fast_2: both 0
    # pass@1: behind tried 10 problems once each, twin 2: behind's 8 failures cost it nothing
    assert twins["metrics"]["pass_at_1"]["difference"] == 0
    intervals = body["charts"]["fast_p_intervals"]["ahead"]
    assert intervals["p"] == list(metrics.FAST_P) and intervals["low"][2] == pytest.approx(wilson_interval(8, n)[0])


@pytest.mark.django_db
def test_the_compare_page_shows_the_differences_table_chart_and_words(client: Any, board: dict[str, Any]) -> None:
    r = client.get("/leaderboard/compare/", {"hardware": board["hardware"].slug,
                                             "models": ["ahead", "behind", "twin"]})
    page = r.content.decode()
    n = len(metrics_problems(board))
    assert 'id="chart-differences"' in page and 'id="difference-words"' in page
    assert 'data-table="differences"' in page
    assert f"behind and twin are not distinguishable on these {n} problems" in page
    assert "ahead − behind on these" in page and "ahead ahead on fast_0" in page
    assert 'class="diff apart"' in page and 'class="diff level"' in page
    charts = r.context["charts"]
    assert [(p["a"], p["b"]) for p in charts["differences"]][0] == ("ahead", "behind")
    csv = client.get("/leaderboard/compare/", {"hardware": board["hardware"].slug, "export": "csv",
                                               "table": "differences", "models": ["ahead", "behind"]})
    head, row = csv.content.decode().splitlines()[:2]
    assert head.startswith("pair,problems,fast_0,fast_0_low,fast_0_high,")
    assert row.startswith(f"ahead − behind,{n},0.6,")
    # one model: nothing to pair, no differences shown
    alone = client.get("/leaderboard/compare/", {"hardware": board["hardware"].slug, "models": ["ahead"]})
    assert 'id="chart-differences"' not in alone.content.decode()


def test_the_client_prints_each_share_with_its_interval() -> None:
    from pkb_client.cli import scores_text

    scope = {"problems": 40, "correct": 12, "fast_p": {"0": 0.3, "1": 0.25},
             "pass_at_k": {"1": 0.3}, "fast_1_at_k": {"1": 0.25}}
    spans = {"fast_p": {"0": {"low": 0.181, "high": 0.454, "method": "wilson"},
                        "1": {"low": 0.142, "high": 0.401, "method": "wilson"}},
             "pass_at_k": {"1": {"low": 0.181, "high": 0.454, "method": "wilson"}},
             "fast_1_at_k": {"1": {"low": 0.142, "high": 0.401, "method": "wilson"}}}
    result = {"run": 7, "model": "m", "hardware": "h", "k": 1, "complete": True, "pending": 0,
              "run_problems": {**scope, "intervals": spans}, "suite": {**scope, "intervals": spans}}
    text = scores_text(result)
    assert "fast_1 25.0% [14.2, 40.1]" in text and "pass@1 30.0% [18.1, 45.4]" in text
    assert "95% interval over the problems" in text
    old = scores_text({**result, "run_problems": scope, "suite": scope})  # a server without intervals
    assert "fast_1 25.0%" in old and "[" not in old


@pytest.mark.django_db
def test_the_openapi_schema_says_what_the_new_fields_are(anonymous_api: Any) -> None:
    schema = anonymous_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    board = schema["paths"]["/api/v1/leaderboards/models/"]["get"]["description"]
    assert "fast_1_low" in board and "95% interval over the problems" in board
    compare = schema["paths"]["/api/v1/compare/"]["get"]["description"]
    assert "differences" in compare and "not distinguishable on" in compare
    scores = schema["paths"]["/api/v1/runs/{id}/scores/"]["get"]["description"]
    assert "95% interval" in scores


@pytest.mark.django_db
def test_the_run_comparison_pairs_runs_over_the_union_of_their_problems(
        client: Any, owner: Any, cpu_hardware: Any, all_reduce: Any, real_report: dict[str, Any],
        no_dispatch: list[int]) -> None:
    from portal.runs import services

    from .conftest import VALID_SOURCE
    from .runs_helpers import finish, load_problems

    load_problems(["all-gather", "reduce-scatter"])
    runs = []
    for model, outcomes in (("model-a", {"all-reduce": [(True, 1.6)], "all-gather": [(True, 1.2)],
                                         "reduce-scatter": [(False, 0.0)]}),
                            ("model-b", {"all-reduce": [(True, 2.5)], "all-gather": [(False, 0.0)]})):
        run = services.create_run(user=owner, data={"model": model, "hardware": cpu_hardware.slug,
                                                    "k": 1, "backend": "cuda"})
        plans = [services.FilePlan(name=f"{p}/0.py", problem=p, source=VALID_SOURCE.encode()) for p in outcomes]
        for row, (ok, speedup) in zip(services.add_files(run, plans, user=owner),
                                      [t for tries in outcomes.values() for t in tries]):
            finish(row.submission, real_report, correct=ok, speedup=speedup, low=speedup * 0.95,
                   high=speedup * 1.05)
        runs.append(run)
    query = {"runs": [r.pk for r in runs]}
    page = client.get("/runs/compare/", query).content.decode()
    # over the 3 problems of either run (b never tried reduce-scatter: a failure for it)
    assert 'id="chart-differences"' in page and 'data-table="differences"' in page
    assert "not distinguishable on these 3 problems" in page
    detail = client.get(f"/runs/{runs[0].pk}/").content.decode()
    assert "95% interval over the 3 problems" in detail


@pytest.mark.browser
@pytest.mark.services
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_comparison_draws_error_bars_and_the_differences(live_server: Any, page: Any,
                                                             board: dict[str, Any]) -> None:
    page.goto(f"{live_server.url}/leaderboard/compare/?hardware={board['hardware'].slug}"
              "&models=ahead&models=behind")
    page.wait_for_selector("#chart-differences .main-svg", timeout=15_000)
    page.wait_for_selector("#chart-fastp .main-svg", timeout=15_000)
    # each model's fast_p curve, and its markers at the six thresholds with their error bars
    drawn = page.evaluate("""() => document.getElementById('chart-fastp')._fullData
        .map((t) => [t.mode, t.error_y && t.error_y.visible ? t.x.length : 0])""")
    assert sorted(drawn) == [["lines", 0], ["lines", 0], ["markers", 6], ["markers", 6]]
    pairs = page.evaluate("""() => document.getElementById('chart-differences')._fullData
        .map((t) => [t.name, t.error_x.visible, t.y.length])""")
    assert pairs == [["ahead − behind", True, 10]]
    assert "not distinguishable on these" in page.locator("#difference-words").inner_text()
    assert page.errors == []
