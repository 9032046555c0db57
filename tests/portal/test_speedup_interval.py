"""Schema 1.3's speedup interval flows from the report to the submission, the leaderboards, the
pages and the exports; results of older reports keep working and are marked as point estimates."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from portal.submissions.importing import import_report, import_results
from portal.submissions.lifecycle import apply_report, record_report
from portal.submissions.models import AIModel, Submission

from .conftest import one_round, with_interval
from .test_worker_callbacks import post

pytestmark = pytest.mark.django_db
SCHEMA = json.loads((Path(settings.BASE_DIR) / "evaluator" / "report.schema.json").read_text())


def finished(report: dict[str, Any], all_reduce: Any, hardware: Any, owner: Any,
             model: str = "interval-model") -> Submission:
    """A finished submission of ``report`` on the ranked setting of ``hardware``."""
    sub = Submission(user=owner, model=AIModel.objects.get_or_create(name=model)[0], attempt=1,
                     problem_version=all_reduce.current_version(), hardware=hardware, backend="cuda",
                     world_size=2, size="small", source="x", source_sha256="0" * 64,
                     status="finished", finished_at=timezone.now())
    apply_report(sub, {**report, "problem": {**report["problem"],
                                             "version": all_reduce.current_version().version}})
    sub.save()
    return sub


def test_a_1_3_report_fills_the_interval_of_its_submission(job: Any, interval_report: dict[str, Any]) -> None:  # noqa: F811
    sub, _ = job
    record_report(sub.pk, interval_report, "w1")
    sub.refresh_from_db()
    assert (sub.speedup_low, sub.speedup_high) == (1.17, 1.21)
    assert sub.speedup == pytest.approx(interval_report["timing"]["speedup"])


def test_an_older_report_leaves_the_interval_empty(job: Any, real_report: dict[str, Any]) -> None:  # noqa: F811
    sub, _ = job
    record_report(sub.pk, real_report, "w1")
    sub.refresh_from_db()
    assert sub.speedup is not None and (sub.speedup_low, sub.speedup_high) == (None, None)


@pytest.mark.skipif("1.3" not in SCHEMA["properties"]["schema_version"]["enum"],
                    reason="evaluator/report.schema.json does not know schema 1.3 yet")
def test_a_worker_hands_in_a_1_3_report_with_its_interval(anonymous_api: Any, job: Any,  # noqa: F811
                                                          interval_report: dict[str, Any]) -> None:
    sub, token = job
    r = post(anonymous_api, sub, "report", token, {"report": interval_report, "worker": "w1"})
    assert r.status_code == 200, r.content
    sub.refresh_from_db()
    assert (sub.speedup_low, sub.speedup_high) == (1.17, 1.21)


def test_the_importer_fills_the_interval_of_a_1_3_report(all_reduce: Any, cpu_hardware: Any,
                                                         interval_report: dict[str, Any],
                                                         tmp_path: Path) -> None:
    report = {**interval_report, "hardware_profile": cpu_hardware.slug}
    assert import_report(tmp_path / "r.json", 0, report, {"model": "m"}, "r.json#0")
    sub = Submission.objects.get(import_path="r.json#0")
    assert (sub.speedup_low, sub.speedup_high) == (1.17, 1.21)


def test_the_committed_h200_reports_still_import_without_an_interval(all_reduce: Any) -> None:
    result = import_results(settings.BASE_DIR / "docs" / "results", settings.BASE_DIR)
    assert any("symm-mem-all-reduce" in label for label in result.imported), result.errors
    sub = Submission.objects.get(import_path__contains="symm-mem-all-reduce")
    assert sub.speedup is not None and (sub.speedup_low, sub.speedup_high) == (None, None)
    page = Client().get(f"/submissions/{sub.pk}/").content.decode()
    assert "no interval" in page and 'id="chart-rounds"' not in page


def test_the_submission_page_shows_the_interval_and_the_rounds_chart(
        interval_report: dict[str, Any], all_reduce: Any, cpu_hardware: Any, owner: Any) -> None:
    sub = finished(interval_report, all_reduce, cpu_hardware, owner)
    page = Client().get(f"/submissions/{sub.pk}/").content.decode()
    assert "1.19x <span class=\"interval\">(1.17–1.21)</span>" in page
    assert 'title="95% interval 1.170-1.210 (bootstrap percentile interval' in page
    assert "over 6 alternating rounds" in page
    assert 'id="chart-rounds"' in page and 'id="data-rounds"' in page
    assert "the interval converged" in page and 'id="clocks-moved"' not in page


def test_the_timing_heading_names_the_device_and_the_method_is_a_paragraph(
        interval_report: dict[str, Any], all_reduce: Any, cpu_hardware: Any, owner: Any) -> None:
    # the method is a sentence of several lines: inside the heading it made a bold paragraph
    sub = finished(interval_report, all_reduce, cpu_hardware, owner)
    page = Client().get(f"/submissions/{sub.pk}/").content.decode()
    method = interval_report["timing"]["method"]
    heading = page[page.index("<h3>Timing"):page.index("</h3>", page.index("<h3>Timing"))]
    assert method not in heading and interval_report["timing"]["device"] in heading
    assert f'<p class="muted" id="timing-method">How it was timed: {method}.</p>' in page


def test_the_rounds_chart_data_has_each_ratio_the_median_and_the_interval(
        interval_report: dict[str, Any], all_reduce: Any, cpu_hardware: Any, owner: Any) -> None:
    sub = finished(interval_report, all_reduce, cpu_hardware, owner)
    page = Client().get(f"/submissions/{sub.pk}/").content.decode()
    start = page.index('<script id="data-rounds" type="application/json">') + len(
        '<script id="data-rounds" type="application/json">')
    data = json.loads(page[start:page.index("</script>", start)])
    assert data["round"] == [1, 2, 3, 4, 5, 6] and len(data["ratio"]) == 6
    assert (data["low"], data["high"], data["level"]) == (1.17, 1.21, 0.95)
    assert data["median"] == pytest.approx(interval_report["timing"]["speedup"])


def test_moved_clocks_carry_a_visible_warning(real_report: dict[str, Any], all_reduce: Any,
                                              cpu_hardware: Any, owner: Any) -> None:
    sub = finished(with_interval(real_report, moved=True), all_reduce, cpu_hardware, owner)
    page = Client().get(f"/submissions/{sub.pk}/").content.decode()
    assert 'id="clocks-moved"' in page and "The GPU clocks moved" in page
    assert "GPU 1 SM clock moved 1980 -&gt; 1755 MHz" in page
    assert "after rounds, GPU 1" in page and "sm_mhz 1755.0" in page


def test_an_older_report_shows_its_point_speedup_and_no_chart(real_report: dict[str, Any], all_reduce: Any,
                                                              cpu_hardware: Any, owner: Any) -> None:
    sub = finished(real_report, all_reduce, cpu_hardware, owner)
    page = Client().get(f"/submissions/{sub.pk}/").content.decode()
    assert "no interval" in page and "schema 1.2 or older" in page
    assert 'id="chart-rounds"' not in page and 'id="clocks-moved"' not in page


def test_the_problem_leaderboard_shows_each_interval_and_marks_point_estimates(
        real_report: dict[str, Any], interval_report: dict[str, Any], all_reduce: Any,
        cpu_hardware: Any, owner: Any) -> None:
    finished(interval_report, all_reduce, cpu_hardware, owner)
    finished(real_report, all_reduce, cpu_hardware, owner, model="older-model")
    page = Client().get(f"/problems/all-reduce/?hardware={cpu_hardware.slug}").content.decode()
    assert "(1.17–1.21)" in page and "over 6 alternating rounds" in page
    assert "no interval" in page


def test_the_problem_leaderboard_csv_has_the_interval_ends(
        interval_report: dict[str, Any], all_reduce: Any, cpu_hardware: Any, owner: Any) -> None:
    finished(interval_report, all_reduce, cpu_hardware, owner)
    body = Client().get(f"/problems/all-reduce/?hardware={cpu_hardware.slug}&export=csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert {"speedup", "speedup_low", "speedup_high"} <= set(rows[0])
    mine = next(r for r in rows if r["model"] == "interval-model")
    assert (mine["speedup_low"], mine["speedup_high"]) == ("1.17", "1.21")
    assert "speedup_note" not in rows[0]


def test_the_comparison_shows_the_interval_in_its_table_charts_and_csv(
        real_report: dict[str, Any], interval_report: dict[str, Any], all_reduce: Any,
        cpu_hardware: Any, owner: Any) -> None:
    finished(interval_report, all_reduce, cpu_hardware, owner)
    finished(real_report, all_reduce, cpu_hardware, owner, model="older-model")
    url = f"/leaderboard/compare/?hardware={cpu_hardware.slug}&models=interval-model&models=older-model"
    page = Client().get(url).content.decode()
    assert "(1.17–1.21)" in page and "no interval" in page
    assert '"intervals": {"interval-model": {"all-reduce": [1.17, 1.21]}, "older-model": {}}' in page
    body = Client().get(url + "&export=csv&table=per_problem").content.decode()
    header = next(csv.reader(io.StringIO(body)))
    assert header == ["problem", "interval-model", "interval-model_low", "interval-model_high",
                      "older-model", "older-model_low", "older-model_high"]


def test_the_model_leaderboard_counts_problems_solved_without_an_interval(
        real_report: dict[str, Any], all_reduce: Any, cpu_hardware: Any, owner: Any) -> None:
    finished(real_report, all_reduce, cpu_hardware, owner, model="older-model")
    page = Client().get(f"/leaderboard/?hardware={cpu_hardware.slug}").content.decode()
    assert "Solved without interval" in page


def test_one_round_shows_no_interval_on_the_submission_page_and_the_board(
        real_report: dict[str, Any], all_reduce: Any, cpu_hardware: Any, owner: Any) -> None:
    sub = finished(one_round(real_report), all_reduce, cpu_hardware, owner)
    assert sub.speedup_low == sub.speedup_high == sub.speedup  # stored as the report gives it
    page = Client().get(f"/submissions/{sub.pk}/").content.decode()
    assert "no interval (1 round)</small>" in page and "(1.19–1.19)" not in page
    assert "1 alternating round in" in page and "fewer than the 6 a 95% interval needs" in page
    start = page.index('<script id="data-rounds" type="application/json">') + len(
        '<script id="data-rounds" type="application/json">')
    chart = json.loads(page[start:page.index("</script>", start)])
    assert chart["ratio"] and (chart["low"], chart["high"]) == (None, None)  # no band drawn
    board = Client().get(f"/problems/all-reduce/?hardware={cpu_hardware.slug}").content.decode()
    assert "no interval (1 round)</small>" in board and "(1.19–1.19)" not in board


def test_ends_that_are_one_value_are_not_bracketed_where_the_rounds_are_unknown() -> None:
    from portal.catalog.templatetags.pkb import speedup

    assert "no interval" in speedup(1.381, 1.381, 1.381) and "(1.38–1.38)" not in speedup(1.381, 1.381, 1.381)
    assert "(1.17–1.21)" in speedup(1.19, 1.17, 1.21)
    assert "no interval (2 rounds)" in speedup(1.19, 0.9, 1.5, "", 2)
    assert "(1.17–1.21)" in speedup(1.19, 1.17, 1.21, "", 6)
