"""The submission page stays light whatever its reports weigh: it renders the per-size summary it
shows and links the whole reports (a sweep's may be 2,000,000 bytes, docs/sweeps.md) instead of
printing them into its HTML."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest

from portal.submissions.models import Submission

from .test_sweeps import SWEEP, _running, swept  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db

# What the page may weigh with the heaviest sweep the evaluator writes: the table, the chart's
# summary and the evaluation's own trials, never a size's whole report.
PAGE_BYTES = 64 * 1024
SWEEP_REPORT_BYTES = 2_000_000  # evaluator/sweep.py's bound


def heavy_sweep() -> dict[str, Any]:
    """SWEEP as nine sizes at eight ranks write it: each size's report carries 40 trials checked on
    every rank, so the nine together come near the bound the evaluator keeps a sweep within."""
    sweep = copy.deepcopy(SWEEP)
    points = []
    for i in range(9):
        point = copy.deepcopy(SWEEP["points"][i % 3])
        point["message_bytes"] = point["target_bytes"] = 4096 * 2 ** i
        report = point["report"]
        trial, check = report["trials"][0], report["trials"][0]["ranks"][0]
        report["trials"] = [{**trial, "index": t, "ranks": [{**check, "rank": r} for r in range(8)]}
                            for t in range(40)]
        points.append(point)
    sweep["points"] = points
    assert 1_500_000 < len(json.dumps(sweep)) <= SWEEP_REPORT_BYTES  # near the bound, within it
    return sweep


@pytest.fixture
def heavy(swept: tuple[Submission, str], real_report: dict[str, Any]) -> Submission:  # noqa: F811
    sub = _running(swept[0], real_report)
    Submission.objects.filter(pk=sub.pk).update(sweep=heavy_sweep(), sweep_status="finished")
    return Submission.objects.get(pk=sub.pk)


def test_the_page_of_a_sweep_near_its_bound_shows_the_summary_and_not_the_reports(client: Any, heavy: Submission) -> None:
    seconds = []
    for _ in range(3):
        start = time.perf_counter()
        html = client.get(f"/submissions/{heavy.pk}/").content.decode()
        seconds.append(time.perf_counter() - start)
    # The measurement docs/portal.md quotes (pytest -s shows it).
    print(f"\nsubmission page: {len(html.encode()):,} bytes of HTML in {1000 * min(seconds):.0f} ms (best of 3) "
          f"with a sweep of {len(json.dumps(heavy.sweep)):,} bytes and a report of {len(json.dumps(heavy.report)):,}")
    assert len(html.encode()) < PAGE_BYTES
    assert html.count("<tr><td>") >= 9 and 'id="data-sweep"' in html  # every size's row, the charts' data
    assert '"evaluator_version"' not in html and "evaluator_version" not in html  # no report, whole or printed
    assert f'href="/submissions/{heavy.pk}/sweep.json"' in html and f'href="/submissions/{heavy.pk}/report.json"' in html


def test_the_sweep_json_is_the_whole_sweep_for_its_owner(client: Any, owner: Any, heavy: Submission) -> None:
    client.force_login(owner)
    r = client.get(f"/submissions/{heavy.pk}/sweep.json")
    assert r.status_code == 200 and r["Content-Type"] == "application/json"
    assert f'filename="submission-{heavy.pk}-sweep.json"' in r["Content-Disposition"]
    assert json.loads(r.content) == heavy.sweep


def test_others_get_the_sweep_json_without_what_quotes_the_source(client: Any, heavy: Submission) -> None:
    from portal.lib.reports import HIDDEN

    heavy.sweep["points"][1]["report"]["failure"]["traceback"] = "File solution.py, line 3: secret = 42"
    Submission.objects.filter(pk=heavy.pk).update(sweep=heavy.sweep)
    shown = client.get(f"/submissions/{heavy.pk}/sweep.json").json()
    assert shown["points"][1]["report"]["failure"]["traceback"] == HIDDEN
    assert len(shown["points"]) == 9


def test_an_old_pass_with_sizes_not_run_reads_incomplete_in_the_sweep_json(client: Any, heavy: Submission) -> None:
    sweep = {**heavy.sweep, "verdict": "pass", "complete": False}
    Submission.objects.filter(pk=heavy.pk).update(sweep=sweep)
    assert client.get(f"/submissions/{heavy.pk}/sweep.json").json()["verdict"] == "incomplete"


def test_the_report_json_is_json_and_hides_the_source_quotes_from_others(client: Any, owner: Any, heavy: Submission) -> None:
    from portal.lib.reports import HIDDEN

    failing = {**heavy.report, "verdict": "fail", "failure": {
        "failure_class": "runtime_error", "message": "boom", "traceback": "line 3: secret = 42"}}
    Submission.objects.filter(pk=heavy.pk).update(report=failing)
    assert client.get(f"/submissions/{heavy.pk}/report.json").json()["failure"]["traceback"] == HIDDEN
    client.force_login(owner)
    assert client.get(f"/submissions/{heavy.pk}/report.json").json() == failing


def test_a_submission_without_a_sweep_or_report_has_no_json_to_serve(client: Any, swept: tuple[Submission, str]) -> None:  # noqa: F811
    sub, _ = swept
    assert client.get(f"/submissions/{sub.pk}/sweep.json").status_code == 404
    assert client.get(f"/submissions/{sub.pk}/report.json").status_code == 404


def test_the_sweep_json_travels_compressed_to_a_browser_that_takes_gzip(client: Any, owner: Any, heavy: Submission) -> None:
    import gzip

    client.force_login(owner)
    r = client.get(f"/submissions/{heavy.pk}/sweep.json", HTTP_ACCEPT_ENCODING="gzip")
    assert r["Content-Encoding"] == "gzip"
    whole = gzip.decompress(r.content)
    print(f"\nsweep.json: {len(r.content):,} bytes gzipped of {len(whole):,}")
    assert json.loads(whole) == heavy.sweep and len(r.content) < len(whole) / 5
