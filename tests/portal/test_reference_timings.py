"""seed imports measured reference timings (check-references --time) as reference-only baselines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from portal.catalog.models import Hardware, ProblemVersion, ReferenceTiming
from portal.catalog.reference_timings import MANIFEST, import_timings
from portal.leaderboards.services import problem_board
from portal.submissions.models import AIModel, Submission

pytestmark = pytest.mark.django_db
MEASUREMENTS = Path(__file__).parents[2] / "docs" / "measurements"


def ok_row(slug: str = "all-reduce", median: float = 0.367) -> dict[str, Any]:
    return {"slug": slug, "world_size": 4, "status": "ok", "message": "", "median_ms": median,
            "p10_ms": median * 0.98, "p90_ms": median * 1.07, "roofline_ms": 0.2895,
            "roofline_bound": "link", "roofline_fraction": 0.2895 / median}


def fail_row(slug: str = "all-reduce") -> dict[str, Any]:
    return {"slug": slug, "world_size": 4, "status": "FAIL", "traceback": None,
            "message": "ranks 0, 1, 2, 3 made no progress for 120 s during timing"}


def write_run(folder: Path, files: dict[str, list[dict[str, Any]]]) -> Path:
    for name, rows in files.items():
        (folder / name).write_text(json.dumps({"device": "cuda", "size": "default", "rows": rows}))
    (folder / MANIFEST).write_text(json.dumps({"runs": [{
        "hardware": "h200-x4-nvlink", "world_size": 4, "size": "default",
        "measured_on": "2026-11-21", "command": "pkb check-references --time", "files": list(files)}]}))
    return folder


@pytest.fixture
def h200(db: None) -> Hardware:
    return Hardware.objects.create(slug="h200-x4-nvlink", name="4x NVIDIA H200", kind="gpu", gpus=4,
                                   world_size=4, profile={"id": "h200-x4-nvlink"})


def test_a_measured_timing_becomes_the_problems_baseline(all_reduce: Any, h200: Hardware,
                                                        tmp_path: Path, anonymous_api: Any) -> None:
    result = import_timings(write_run(tmp_path, {"refs.json": [ok_row()]}))
    assert len(result.created) == 1 and not result.errors
    timing = ReferenceTiming.objects.get()
    assert timing.problem_version == all_reduce.current_version()
    assert (timing.world_size, timing.size, timing.kind) == (4, "default", "reference-only")
    assert timing.source_file.endswith("refs.json") and str(timing.measured_on) == "2026-11-21"

    row = problem_board(all_reduce.current_version(), h200).table.rows[0]
    assert row["model"] == "baseline: reference" and row["time_ms"] == pytest.approx(0.367)
    assert row["p10_ms"] < row["time_ms"] < row["p90_ms"] and row["submission"] is None
    body = anonymous_api.get("/api/v1/leaderboards/problems/all-reduce/",
                             {"hardware": "h200-x4-nvlink"}).json()
    assert body["baseline_ms"] == pytest.approx(0.367)
    assert body["baseline"]["basis"] == "reference-only"
    assert body["baseline"]["source_file"].endswith("refs.json")
    assert body["rows"][0]["roofline_fraction"] == pytest.approx(0.2895 / 0.367)


def test_importing_twice_changes_nothing(all_reduce: Any, h200: Hardware, tmp_path: Path) -> None:
    folder = write_run(tmp_path, {"refs.json": [ok_row()]})
    import_timings(folder)
    again = import_timings(folder)
    assert (again.created, again.updated, len(again.unchanged)) == ([], [], 1)
    assert ReferenceTiming.objects.count() == 1


def test_a_rerun_replaces_the_row_of_the_first_run(all_reduce: Any, h200: Hardware,
                                                   tmp_path: Path) -> None:
    import_timings(write_run(tmp_path, {"refs.json": [ok_row(median=0.5)]}))
    result = import_timings(write_run(tmp_path, {"refs.json": [ok_row(median=0.5)],
                                                 "rerun.json": [ok_row(median=0.4)]}))
    assert len(result.updated) == 1
    timing = ReferenceTiming.objects.get()
    assert timing.median_ms == pytest.approx(0.4) and timing.source_file.endswith("rerun.json")


def test_a_rerun_that_passed_replaces_a_failure(all_reduce: Any, h200: Hardware, tmp_path: Path) -> None:
    import_timings(write_run(tmp_path, {"refs.json": [fail_row()], "rerun.json": [ok_row()]}))
    assert ReferenceTiming.objects.get().source_file.endswith("rerun.json")


def test_a_failed_or_untimed_row_makes_no_baseline(all_reduce: Any, h200: Hardware,
                                                   tmp_path: Path) -> None:
    untimed = {**ok_row(), "median_ms": None}
    result = import_timings(write_run(tmp_path, {"refs.json": [fail_row()]}))
    assert len(result.not_ok) == 1 and not ReferenceTiming.objects.exists()
    import_timings(write_run(tmp_path, {"refs.json": [untimed]}))
    assert not ReferenceTiming.objects.exists()
    assert problem_board(all_reduce.current_version(), h200).baseline is None


def test_a_later_failure_removes_the_earlier_measurement(all_reduce: Any, h200: Hardware,
                                                         tmp_path: Path) -> None:
    import_timings(write_run(tmp_path, {"refs.json": [ok_row()]}))
    import_timings(write_run(tmp_path, {"refs.json": [ok_row()], "rerun.json": [fail_row()]}))
    assert not ReferenceTiming.objects.exists()


def test_a_timing_stays_on_the_version_it_measured(all_reduce: Any, h200: Hardware,
                                                   tmp_path: Path) -> None:
    folder = write_run(tmp_path, {"refs.json": [ok_row()]})
    import_timings(folder)
    measured = all_reduce.current_version()
    ProblemVersion.objects.filter(problem=all_reduce).update(is_current=False)
    ProblemVersion.objects.create(problem=all_reduce, version="changed0000000000", is_current=True)
    import_timings(folder)
    assert ReferenceTiming.objects.get().problem_version == measured


def test_a_full_evaluation_stays_the_preferred_baseline(all_reduce: Any, h200: Hardware, owner: Any,
                                                        tmp_path: Path, real_report: dict[str, Any]) -> None:
    import_timings(write_run(tmp_path, {"refs.json": [ok_row()]}))
    now = timezone.now()
    sub = Submission.objects.create(
        user=owner, model=AIModel.objects.create(name="reference", kind="reference"), attempt=1,
        problem_version=all_reduce.current_version(), hardware=h200, backend="reference",
        world_size=4, size="default", source="x", source_sha256="0" * 64, status="finished",
        created_at=now, finished_at=now, report=real_report, verdict="pass", speedup=1.0,
        candidate_ms=0.36, reference_ms=0.3668)
    board = problem_board(all_reduce.current_version(), h200)
    assert board.baseline and board.baseline.basis == "evaluation"
    assert board.baseline_ms == pytest.approx(0.3668) and board.table.rows[0]["submission"] == sub.pk


def test_the_committed_h200_measurements_import(all_reduce: Any, h200: Hardware, settings: Any) -> None:
    settings.BASE_DIR = MEASUREMENTS.parents[1]
    result = import_timings(MEASUREMENTS)
    timing = ReferenceTiming.objects.get(problem_version__problem=all_reduce)
    assert timing.median_ms == pytest.approx(0.36696, rel=1e-4)
    assert timing.source_file == "docs/measurements/refs-x4-2026-11-21.json"
    # Only all-reduce is loaded here: every other row names a problem this database lacks.
    assert all("unknown problem" in e for e in result.errors) and len(result.errors) == 116


def test_a_row_is_tied_to_the_version_it_measured(all_reduce: Any, h200: Hardware, tmp_path: Path) -> None:
    current = all_reduce.current_version()
    result = import_timings(write_run(tmp_path, {"refs.json": [{**ok_row(), "version": current.version}]}))
    assert len(result.created) == 1
    assert ReferenceTiming.objects.get().problem_version == current


def test_a_row_of_a_version_that_is_not_loaded_makes_no_baseline(all_reduce: Any, h200: Hardware,
                                                                 tmp_path: Path) -> None:
    result = import_timings(write_run(tmp_path, {"refs.json": [{**ok_row(), "version": "0123456789abcdef"}]}))
    assert not result.created and not ReferenceTiming.objects.exists()
    assert "measured version 0123456789abcdef is not loaded" in result.not_ok[0]
