"""load_catalog / seed: idempotent; a changed module makes a new version; reports import as-is."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

import problems
from portal.catalog.models import Hardware, Problem, ProblemVersion
from portal.catalog.services import load_catalog
from portal.submissions.importing import import_results
from portal.submissions.models import Submission

pytestmark = pytest.mark.django_db


def fake_registry(monkeypatch: pytest.MonkeyPatch, text_suffix: str) -> str:
    """A registry with the two template problems; the all-reduce module text can be altered."""
    chosen = (problems.get("all-reduce"), problems.get("tp-allgather-gemm"))
    module = types.SimpleNamespace(
        all_problems=lambda: chosen,
        source_text=lambda p: problems.source_text(p) + (text_suffix if p.slug == "all-reduce" else ""),
        version=lambda p: problems.version(p) if p.slug != "all-reduce" or not text_suffix
        else "changed0000000000")
    monkeypatch.setattr("portal.catalog.services._registry", lambda package: module)
    return "unused"


def test_loading_twice_changes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_registry(monkeypatch, "")
    first = load_catalog("problems", tmp_path)
    second = load_catalog("problems", tmp_path)
    assert sorted(first.created) == ["all-reduce", "tp-allgather-gemm"]
    assert sorted(second.unchanged) == ["all-reduce", "tp-allgather-gemm"]
    assert ProblemVersion.objects.count() == 2
    assert Hardware.objects.filter(builtin=True, kind="cpu").count() == 1


def test_a_changed_module_makes_a_new_current_version(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    fake_registry(monkeypatch, "")
    load_catalog("problems", tmp_path)
    fake_registry(monkeypatch, "\n# changed\n")
    result = load_catalog("problems", tmp_path)
    assert result.new_versions == ["all-reduce"]
    versions = ProblemVersion.objects.filter(problem__slug="all-reduce")
    assert versions.count() == 2
    assert versions.get(is_current=True).version == "changed0000000000"


def test_a_problem_that_left_the_suite_is_retired(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_registry(monkeypatch, "")
    load_catalog("problems", tmp_path)
    module = types.SimpleNamespace(all_problems=lambda: (problems.get("all-reduce"),),
                                   source_text=problems.source_text, version=problems.version)
    monkeypatch.setattr("portal.catalog.services._registry", lambda package: module)
    assert load_catalog("problems", tmp_path).retired == ["tp-allgather-gemm"]
    assert Problem.objects.get(slug="tp-allgather-gemm").retired


def test_details_hold_shapes_and_traffic_per_world_size(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    fake_registry(monkeypatch, "")
    load_catalog("problems", tmp_path)
    v = ProblemVersion.objects.get(problem__slug="tp-allgather-gemm", is_current=True)
    assert v.shapes(4, "default")["x_shard"] == {"shape": [2048, 8192], "dtype": "bfloat16"}
    assert v.traffic(4, "default")["link_bytes"] > 0
    assert v.signature.startswith("def solution(x_shard")


def test_hardware_profiles_load_from_json_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_registry(monkeypatch, "")
    (tmp_path / "h200.json").write_text(json.dumps(
        {"id": "h200-x4", "kind": "gpu", "gpus": {"model": "NVIDIA H200", "count": 4}}))
    load_catalog("problems", tmp_path)
    hw = Hardware.objects.get(slug="h200-x4")
    assert (hw.kind, hw.gpus, hw.world_size, hw.name) == ("gpu", 4, 4, "4x NVIDIA H200")


def test_committed_reports_import_once_as_they_are(all_reduce: Any, cpu_hardware: Any,
                                                   real_report: dict[str, Any], tmp_path: Path) -> None:
    Hardware.objects.filter(pk=cpu_hardware.pk).update(builtin=False)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "a.json").write_text(json.dumps({"model": "reference", "reports": [real_report]}))
    first = import_results(tmp_path, tmp_path)
    second = import_results(tmp_path, tmp_path)
    assert (len(first.imported), len(second.skipped)) == (1, 1)
    sub = Submission.objects.get()
    assert sub.report == real_report and sub.status == "finished" and sub.model.name == "reference"
    assert sub.origin == "import" and sub.import_path == "run/a.json#0"


def test_a_report_on_unknown_hardware_records_the_machine_only(all_reduce: Any, tmp_path: Path,
                                                               real_report: dict[str, Any]) -> None:
    report = {**real_report, "hardware_profile": "h200-x8-unpublished",
              "setting": {**real_report["setting"], "device": "cuda", "world_size": 8}}
    (tmp_path / "r.json").write_text(json.dumps(report))
    assert len(import_results(tmp_path, tmp_path).imported) == 1
    hw = Hardware.objects.get(slug="h200-x8-unpublished")
    assert hw.profile == {"id": "h200-x8-unpublished", "unpublished": True} and hw.gpus == 8


def test_seed_command_runs(monkeypatch: pytest.MonkeyPatch, settings: Any, tmp_path: Path) -> None:
    fake_registry(monkeypatch, "")
    settings.PKB_RESULTS_DIR = tmp_path
    call_command("seed")
    call_command("seed")
    assert Problem.objects.count() == 2


def test_a_committed_report_that_breaks_the_schema_is_not_imported(all_reduce: Any, cpu_hardware: Any,
                                                                  real_report: dict[str, Any],
                                                                  tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    broken = {**real_report, "verdict": "maybe"}
    (tmp_path / "run" / "a.json").write_text(json.dumps({"model": "reference", "reports": [broken]}))
    result = import_results(tmp_path, tmp_path)
    assert result.imported == [] and not Submission.objects.exists()
    assert "report.schema.json at verdict" in result.errors[0]


def test_imported_human_kernels_are_credited_to_their_own_seed_so_a_library_baseline_is_a_row_of_its_own(
        all_reduce: Any, tmp_path: Path) -> None:
    """Both committed 2 x H200 all-reduce seeds are `human`: the team's two-shot kernel and PyTorch's
    symmetric-memory all-reduce (library code, a baseline). The shared model's provider is whoever
    was imported first, so each submission carries its seed's provider, and the problem's board
    ranks them apart under their own names."""
    from portal.leaderboards.services import problem_board

    seeds = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200-x2-nvlink"
    for name in ("library-all-reduce-all_reduce_torch_symm_mem.json", "symm_mem-all-reduce-all_reduce_two_shot.json"):
        (tmp_path / name).write_text((seeds / name).read_text())
    result = import_results(tmp_path, tmp_path)
    assert len(result.imported) == 3 and not result.errors  # two reports and the two-shot's sweep
    subs = Submission.objects.order_by("import_path")
    assert [(s.model.name, s.credit) for s in subs] == [
        ("human", "library code (PyTorch), a baseline row"), ("human", "PKB team (hand-written)")]
    version = subs[0].problem_version
    board = problem_board(version, subs[0].hardware)
    credits = sorted(row["credit"] for row in board.table.rows if row["model"] == "human")
    assert credits == ["PKB team (hand-written)", "library code (PyTorch), a baseline row"]
