"""seed puts the committed GPU board results (docs/measurements/board) on the model leaderboard
as runs, with the numbers their reports gave and where they come from."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from portal.catalog.services import load_catalog
from portal.runs import presenters, scoring
from portal.runs.board_seed import load_rows, seed_board
from portal.runs.models import Run, RunSample
from portal.runs.pkb.importer import MULTICAST_NOTE
from portal.runs.pkb.names import parse_run_dir
from portal.runs.scoring import SCORED_P
from portal.submissions.models import Submission

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).parents[2]
BOARD = ROOT / "docs" / "measurements" / "board"
RESULTS = BOARD / "h100-x2-nvlink-results.jsonl"
PLAN = json.loads((BOARD / "plan.json").read_text())


@pytest.fixture
def catalog(db: None) -> None:
    """The whole catalog and hardware, as seed loads them (about 15 s: the tests using it are slow)."""
    load_catalog(settings.PKB_PROBLEMS_PACKAGE, settings.PKB_HARDWARE_DIR)


def by_directory(results: Path = RESULTS) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in load_rows(results).values():
        found[row["directory"]].append(row)
    return found


def scored_rows(directory: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The directory's evaluated files and, as failed attempts, the files its plan says the
    import refuses for what the model wrote (a syntax error): what the run's scores count."""
    faults = [{"problem": f["problem"], "pkb_id": f["pkb_id"], "verdict": "fail", "speedup": None,
               "speedup_low": None} for f in PLAN.get("model_faults", {}).get(directory, [])]
    assert not {(f["problem"], f["pkb_id"]) for f in faults} & {(r["problem"], r["pkb_id"]) for r in rows}
    return rows + faults


def committed_results() -> list[Path]:
    """Every hardware's committed board file (h100-x2-nvlink, h200-x2-nvlink, ...)."""
    found = sorted(BOARD.glob("*-results.jsonl"))
    assert RESULTS in found
    return found


def expected_fast_p(rows: list[dict[str, Any]], p: float) -> float:
    """fast_p over the run's problems, from the file: a pass whose interval's lower end (its
    point speedup without one) is above p; every PKB problem its own problem (k = 1)."""
    problems = {(r["problem"], r["pkb_id"]) for r in rows}
    fast = {(r["problem"], r["pkb_id"]) for r in rows if r["verdict"] == "pass" and
            (p == 0 or (r["speedup_low"] if r["speedup_low"] is not None else r["speedup"]) > p)}
    return len(fast) / len(problems)


@pytest.mark.slow
def test_each_directory_becomes_a_scored_run_with_its_provenance(catalog: None) -> None:
    result = seed_board(BOARD, ROOT)
    assert not result.errors
    files = committed_results()
    assert len(result.added) == sum(len(rows) for f in files for rows in by_directory(f).values())
    for results in files:
        check_board_page(results)


def check_board_page(results: Path) -> None:
    hardware = results.name.removesuffix("-results.jsonl")
    groups = by_directory(results)
    page = Client().get("/leaderboard/", {"hardware": hardware}).content.decode()
    for directory, rows in groups.items():
        run = Run.objects.get(imported_from=directory, hardware__slug=hardware)
        assert run.model.name == parse_run_dir(directory).entry and run.k == 1
        assert run.seeded_from == f"docs/measurements/board/{results.name}"
        assert run.samples.filter(status=RunSample.ACCEPTED).count() == len(rows)
        row = next(r for r in presenters.runs_table([run]).rows if r["run"] == run.pk)
        passes = sum(r["verdict"] == "pass" for r in rows)
        scored = scored_rows(directory, rows)
        assert row["correct"] == passes and row["problems"] == len(scored)
        assert row["pass_at_k"] == pytest.approx(passes / len(scored))
        for p in SCORED_P:
            assert row[f"fast_{p:g}".replace(".", "_")] == pytest.approx(expected_fast_p(scored, p))
        assert row["fast_1_at_k"] == pytest.approx(expected_fast_p(scored, 1.0))
        planned = len(PLAN["directories"][directory])
        assert run.files_planned == planned
        assert row["evaluated"] == ("all" if len(rows) == planned else f"{len(rows)} of {planned} files")
        for fact in {r["git"] for r in rows} | {r["host"] for r in rows}:
            assert fact in page
        assert f'href="/runs/{run.pk}/"' in page
    assert "sandbox on" in page and "written for H100 x8 by their authors" in page
    models_table = page.split('data-table="models"', 1)[1].split("data-table=", 1)[0]
    for directory in groups:  # the models table too, not only the runs', each row a link to its results
        entry = parse_run_dir(directory).entry
        link = f'href="/leaderboard/compare/?hardware={hardware}&amp;models={entry}"'
        assert f'<td class="model"><a {link}' in models_table and f">{entry}</a></td>" in models_table
        alone = Client().get("/leaderboard/compare/", {"hardware": hardware, "models": entry}).content.decode()
        assert f"{entry} alone: its best attempt at each problem is below" in alone
    # One directory per board row: a model's CUDA and Triton directories are ranked apart, or it
    # would have two attempts at a problem where the others have one (the board takes the best).
    seeded = Run.objects.filter(hardware__slug=hardware, seeded_from__endswith=results.name)
    models = list(seeded.values_list("model__name", flat=True))
    assert len(models) == len(set(models)) == len(groups)


@pytest.mark.slow
def test_a_sample_keeps_the_report_the_gpu_gave(catalog: None) -> None:
    seed_board(BOARD, ROOT)
    for row in load_rows(RESULTS).values():
        sub = Submission.objects.get(import_path=f"docs/measurements/board/{RESULTS.name}#{row['key']}")
        assert (sub.status, sub.verdict, sub.failure_class) == (row["status"], row["verdict"],
                                                               row["failure_class"])
        assert sub.speedup == row["speedup"] and sub.speedup_low == row["speedup_low"]
        assert sub.report == row["submission"]["report"] and sub.origin == "import"
        assert sub.source_sha256 == row["submission"]["report"]["solution"]["sha256"]
        assert sub.run_sample.pkb_id == row["pkb_id"] and sub.run_sample.name == row["file"]


@pytest.mark.slow
def test_a_later_batch_adds_its_lines_and_a_second_seed_adds_nothing(catalog: None,
                                                                     tmp_path: Path) -> None:
    board = tmp_path / "docs" / "measurements" / "board"
    board.mkdir(parents=True)
    lines = RESULTS.read_text().splitlines(keepends=True)
    (board / RESULTS.name).write_text("".join(lines[:10]))
    first = seed_board(board, tmp_path)
    assert len(first.runs_created) == 1 and len(first.added) == 10
    assert "10 files evaluated" in Run.objects.get().note

    (board / RESULTS.name).write_text("".join(lines))
    later = seed_board(board, tmp_path)
    again = seed_board(board, tmp_path)
    # One run per directory: the first ten lines' run grows, the other directories get theirs.
    directories = [json.loads(line)["directory"] for line in lines]
    first_dir = directories[0]
    assert len(later.runs_created) == len(set(directories)) - 1
    assert not any(first_dir in created for created in later.runs_created)
    assert len(later.added) == len(lines) - 10
    assert not again.added and len(again.unchanged) == len(lines) and not again.errors
    assert Run.objects.count() == len(set(directories)) and Submission.objects.count() == len(lines)
    first_run = Run.objects.get(imported_from=first_dir)
    assert f"{directories.count(first_dir)} files evaluated" in first_run.note


@pytest.mark.slow
def test_a_run_seeded_under_its_bare_model_name_moves_to_its_directorys_own_row(catalog: None) -> None:
    """A database seeded before directories were ranked apart held Gemini 3 Pro's Triton run under
    the CUDA run's model: seeding again moves the run and its submissions, attempts renumbered."""
    seed_board(BOARD, ROOT)
    triton = Run.objects.filter(imported_from__startswith="solutions_triton_", hardware__slug="h200-x2-nvlink").first()
    cuda = Run.objects.get(imported_from=triton.imported_from.replace("solutions_triton_", "solutions_cuda_"),
                           hardware=triton.hardware)
    subs = Submission.objects.filter(run_sample__run=triton)
    cuda_attempts = dict(Submission.objects.filter(run_sample__run=cuda).values_list("pk", "attempt"))
    triton.model = cuda.model  # as the seed left it before
    triton.save(update_fields=["model"])
    subs.update(model=cuda.model, attempt=2)

    again = seed_board(BOARD, ROOT)
    assert not again.errors and not again.added
    triton.refresh_from_db()
    assert triton.model.name == parse_run_dir(triton.imported_from).entry != cuda.model.name
    assert set(subs.values_list("model", flat=True)) == {triton.model.pk}
    attempts: dict[int, list[int]] = defaultdict(list)  # two PKB problems can share one of ours
    for version, attempt in subs.values_list("problem_version", "attempt"):
        attempts[version].append(attempt)
    assert all(sorted(found) == list(range(1, len(found) + 1)) for found in attempts.values())
    assert dict(Submission.objects.filter(run_sample__run=cuda).values_list("pk", "attempt")) == cuda_attempts


@pytest.mark.slow
def test_the_imports_note_recorded_by_the_batch_names_a_multicast_failure(catalog: None,
                                                                         tmp_path: Path) -> None:
    row = next(r for r in load_rows(RESULTS).values() if r["failure_class"] == "runtime_error")
    (tmp_path / RESULTS.name).write_text(json.dumps({**row, "import_message": MULTICAST_NOTE}) + "\n")
    assert not seed_board(tmp_path, tmp_path).errors
    sample = RunSample.objects.get()
    assert sample.message == MULTICAST_NOTE and presenters.verdict_class(sample) == "needs_multicast"


def test_a_line_without_its_provenance_is_refused_by_name(tmp_path: Path) -> None:
    row = json.loads(RESULTS.read_text().splitlines()[0])
    del row["git"], row["submission"]
    bad = tmp_path / "x-results.jsonl"
    bad.write_text(RESULTS.read_text().splitlines()[0] + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="line 2: no git, submission"):
        load_rows(bad)
    shutil.copy(bad, tmp_path / "y-results.jsonl")
    result = seed_board(tmp_path, tmp_path)
    assert [e.split(":")[0] for e in result.errors] == ["x-results.jsonl", "y-results.jsonl"]
    assert not Run.objects.exists()


def test_results_of_hardware_without_a_profile_are_refused_by_name(tmp_path: Path) -> None:
    row = json.loads(RESULTS.read_text().splitlines()[0])
    (tmp_path / "h999-results.jsonl").write_text(json.dumps({**row, "hardware": "h999-x2"}) + "\n")
    result = seed_board(tmp_path, tmp_path)
    assert len(result.errors) == 1 and "no hardware 'h999-x2'" in result.errors[0]
    assert "hardware/h999-x2.json" in result.errors[0] and not Run.objects.exists()


def test_every_committed_result_is_a_file_the_plan_lists() -> None:
    """The plan (python manage.py board_plan) and the batches' results name the same files: a
    result outside it would make a run's "N of M files" wrong."""
    assert PLAN["files"] == sum(len(files) for files in PLAN["directories"].values())
    for results in committed_results():
        for row in load_rows(results).values():
            assert row["file"] in PLAN["directories"][row["directory"]], row["key"]


@pytest.mark.slow
def test_a_run_whose_board_is_unfinished_says_how_much_of_its_directory_it_holds(
        catalog: None, tmp_path: Path) -> None:
    board = tmp_path / "docs" / "measurements" / "board"
    board.mkdir(parents=True)
    all_lines = RESULTS.read_text().splitlines(keepends=True)
    directory = json.loads(all_lines[0])["directory"]
    lines = [line for line in all_lines if json.loads(line)["directory"] == directory]
    (board / RESULTS.name).write_text("".join(lines[:3]))
    (board / "plan.json").write_text(json.dumps({"directories": {directory: [f"{i}_x.py" for i in range(25)]}}))
    assert not seed_board(board, tmp_path).errors
    run = Run.objects.get()
    assert run.files_planned == 25
    assert presenters.runs_table([run]).rows[0]["evaluated"] == "3 of 25 files"
    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert "3 of the 25 files its directory plans have been evaluated" in page
    board_page = Client().get("/leaderboard/", {"hardware": run.hardware.slug}).content.decode()
    assert "3 of the 25 files its directory plans evaluated so far" in board_page

    # A plan that cannot be read is named; the runs still seed and keep what they knew.
    (board / "plan.json").write_text('{"directories": ["not", "a", "mapping"]}')
    (board / RESULTS.name).write_text("".join(lines[:4]))
    later = seed_board(board, tmp_path)
    assert len(later.errors) == 1 and "plan.json: not a board plan" in later.errors[0]
    assert len(later.added) == 1 and Run.objects.get().files_planned == 25

    # A run with every planned file says "all", as one made here does once its jobs are done.
    (board / "plan.json").write_text(json.dumps({"directories": {directory: ["a.py", "b.py", "c.py", "d.py"]}}))
    assert not seed_board(board, tmp_path).errors
    assert presenters.runs_table([Run.objects.get()]).rows[0]["evaluated"] == "all"


@pytest.mark.slow
def test_a_file_the_import_refuses_for_the_model_is_a_failed_attempt_of_the_seeded_run(
        catalog: None, tmp_path: Path) -> None:
    board = tmp_path / "docs" / "measurements" / "board"
    board.mkdir(parents=True)
    row = json.loads(RESULTS.read_text().splitlines()[0])
    (board / RESULTS.name).write_text(json.dumps(row) + "\n")
    fault = {"file": "39_ulysses_gather_seq_scatter_heads_qkv_triton.py", "code": "syntax_error",
             "problem": "ulysses-qkv-packed", "pkb_id": 38, "message": "Python syntax error at line 317"}
    (board / "plan.json").write_text(json.dumps({"directories": {row["directory"]: [row["file"], "x.py"]},
                                                 "model_faults": {row["directory"]: [fault]}}))
    assert not seed_board(board, tmp_path).errors
    assert not seed_board(board, tmp_path).errors  # a second seed adds no second refusal
    run = Run.objects.get()
    refused = run.samples.get(status=RunSample.REJECTED)
    assert (refused.code, refused.problem.slug, refused.pkb_id) == ("syntax_error", "ulysses-qkv-packed", 38)
    result = scoring.scores(run)["run_problems"]
    assert (result["problems"], result["attempts"], result["correct"]) == (2, 2, int(row["verdict"] == "pass"))
    assert result["outcomes"].get("syntax_error") == 1
    assert presenters.runs_table([run]).rows[0]["evaluated"] == "1 of 2 files"  # the refusal is no file to evaluate
