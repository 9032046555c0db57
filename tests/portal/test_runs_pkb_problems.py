"""Each ParallelKernelBench problem is its own problem of the run, also where two map to one of
ours (PKB 2 and 34 both to all-gather), and the import's dry run says exactly what it will do."""

from __future__ import annotations

from typing import Any

import pytest

from portal.runs import scoring
from portal.runs.models import Run, RunSample
from portal.runs.presenters import matrix
from portal.submissions.models import Submission

from .runs_helpers import CATALOG, PKB_DIR, TEST_PKB_INDEX, finish, load_problems, pack, pkb_files

pytestmark = pytest.mark.django_db
# PKB 34 (ulysses_all_gather_into_tensor_primitive; the generated file is numbered 35) is an
# all-gather here too. Its body is never run: these tests are about counting.
PKB_34 = (PKB_DIR.name + "/35_ulysses_all_gather_into_tensor_primitive_cuda.py",
          b"import torch\n\ndef solution(x):\n    return x\n")
INDEX = {**TEST_PKB_INDEX, 34: ["all-gather"]}


@pytest.fixture
def catalog(all_reduce: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    load_problems(CATALOG)
    monkeypatch.setattr("portal.runs.pkb.importer.pkb_index", lambda: INDEX)


def _import(api: Any, hardware: Any, files: dict[str, bytes], dry: bool, **fields: Any) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return api.post("/api/v1/runs/pkb-import/" + ("?dry_run=1" if dry else ""),
                    {"archive": SimpleUploadedFile("d.zip", pack(files)), "hardware": hardware.slug,
                     **fields}, format="multipart")


def test_two_pkb_problems_that_map_to_one_of_ours_are_two_problems_of_the_run(
        owner_api: Any, cpu_hardware: Any, catalog: None, no_dispatch: list[int],
        real_report: dict[str, Any]) -> None:
    files = {k: v for k, v in pkb_files().items() if k.endswith("/2_allgather_cuda.py")}
    files[PKB_34[0]] = PKB_34[1]
    body = _import(owner_api, cpu_hardware, files, dry=False).json()  # k = 1, the default
    assert body["accepted"] == 2, body["files"]
    samples = {s.pkb_id: s for s in RunSample.objects.filter(run_id=body["id"])}
    finish(samples[2].submission, real_report, correct=True, speedup=1.2)
    finish(samples[34].submission, real_report, correct=False, speedup=0.5)
    run = Run.objects.get(pk=body["id"])
    own = scoring.scores(run)["run_problems"]
    assert own["problems"] == 2 and own["correct"] == 1 and own["pass_at_k"]["1"] == 0.5
    rows = {row["label"]: [c and c["class"] for c in row["cells"]] for row in matrix(run)["rows"]}
    assert rows == {"all-gather (PKB 2)": ["fast"], "all-gather (PKB 34)": ["value_mismatch"]}
    # Over the suite both are attempts at our all-gather, as on the leaderboard.
    suite = scoring.scores(run)["suite"]
    assert suite["attempts"] == 2 and suite["correct"] == 1


def test_a_second_sample_of_one_pkb_problem_still_needs_k(owner_api: Any, cpu_hardware: Any,
                                                          catalog: None, no_dispatch: list[int]) -> None:
    name, source = next((k, v) for k, v in pkb_files().items() if k.endswith("/2_allgather_cuda.py"))
    files = {name: source, name.replace("/2_allgather", "/sample1/2_allgather"): source}
    body = _import(owner_api, cpu_hardware, files, dry=False).json()
    codes = sorted(f["code"] or "accepted" for f in body["files"])
    assert codes == ["accepted", "too_many_samples"]
    assert "all-gather (PKB 2) already has the run's k = 1" in str(body["files"])


@pytest.mark.parametrize("k", [1, 2])
def test_the_dry_run_reports_exactly_what_the_import_does(
        owner_api: Any, cpu_hardware: Any, catalog: None, no_dispatch: list[int], k: int,
        django_capture_on_commit_callbacks: Any) -> None:
    files = {**pkb_files(), PKB_34[0]: PKB_34[1]}
    with django_capture_on_commit_callbacks(execute=True) as dry_dispatches:
        dry = _import(owner_api, cpu_hardware, files, dry=True, k=k)
    assert dry.status_code == 200, dry.content
    assert not Run.objects.exists() and not Submission.objects.exists()
    assert not dry_dispatches and not no_dispatch
    with django_capture_on_commit_callbacks(execute=True):
        real = _import(owner_api, cpu_hardware, files, dry=False, k=k)
    assert real.status_code == 201, real.content
    d, r = dry.json(), real.json()
    assert (d["accepted"], d["rejected"]) == (r["accepted"], r["rejected"]) and d["accepted"] >= 8

    def fates(body: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(f["name"], f["status"], f["problem"], f["code"], f["message"], f["adapter"], f["index"])
                for f in body["files"]]

    assert fates(d) == fates(r)
    assert len(no_dispatch) == r["accepted"]
