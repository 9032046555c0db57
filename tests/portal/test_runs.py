"""Runs without a worker: creating, adding samples (one, archives, refusals), PKB names and
import plans, and scores against a hand computation on real reports."""

from __future__ import annotations

from typing import Any

import pytest

from portal.runs.models import Run, RunSample
from portal.runs.pkb import names
from portal.runs.pkb.importer import MULTICAST_NOTE
from portal.runs.presenters import matrix
from portal.submissions.models import Submission

from .conftest import VALID_SOURCE
from .runs_helpers import (CATALOG, PKB_DIR, TEST_PKB_INDEX, finish, hand_scores, load_problems,
                           pack, pkb_files)

pytestmark = pytest.mark.django_db
WRONG = VALID_SOURCE.replace("return out", "return out * 2")


@pytest.fixture
def catalog(all_reduce: Any) -> None:
    load_problems(CATALOG)


def _run(api: Any, hardware: Any, **extra: Any) -> dict[str, Any]:
    body = {"model": "run-model", "provider": "lab", "hardware": hardware.slug, "k": 3,
            "backend": "torch", "precision": "bf16", "sampling": {"temperature": 0.7},
            "note": "three samples", "link": "https://example.org/run", **extra}
    r = api.post("/api/v1/runs/", body, format="json")
    assert r.status_code == 201, r.json()
    return r.json()


def test_creating_a_run_states_its_conditions(owner_api: Any, cpu_hardware: Any) -> None:
    run = _run(owner_api, cpu_hardware)
    assert run["k"] == 3 and run["sampling"] == {"temperature": 0.7} and run["owner"] == "owner"
    stored = Run.objects.get(pk=run["id"])
    assert stored.model.name == "run-model" and stored.hardware == cpu_hardware


@pytest.mark.parametrize("field,value,code", [
    ("k", 0, "bad_k"), ("k", "three", "bad_k"), ("hardware", "nowhere", "unknown_hardware"),
    ("backend", "fortran", "unknown_backend"), ("precision", "fp64", "unknown_precision"),
    ("sampling", [1, 2], "bad_sampling"), ("link", "javascript:alert(1)", "bad_link"),
    ("model", "", "bad_model_name")])
def test_a_bad_run_is_refused_and_nothing_stored(owner_api: Any, cpu_hardware: Any, field: str,
                                                 value: Any, code: str) -> None:
    body = {"model": "m", "hardware": cpu_hardware.slug, "k": 3, field: value}
    r = owner_api.post("/api/v1/runs/", body, format="json")
    assert r.status_code == 400 and r.json()["error"]["code"] == code
    assert not Run.objects.exists()


def test_anonymous_cannot_create_and_others_cannot_add(anonymous_api: Any, owner_api: Any,
                                                       other_api: Any, cpu_hardware: Any,
                                                       catalog: None, no_dispatch: list[int]) -> None:
    assert anonymous_api.post("/api/v1/runs/", {"model": "m"}, format="json").status_code == 401
    run = _run(owner_api, cpu_hardware)
    r = other_api.post(f"/api/v1/runs/{run['id']}/samples/",
                       {"problem": "all-reduce", "source": VALID_SOURCE}, format="json")
    assert r.status_code == 403 and r.json()["error"]["code"] == "not_owner"
    assert not Submission.objects.exists()


def test_samples_one_by_one_and_by_archive_with_per_file_results(
        owner_api: Any, cpu_hardware: Any, catalog: None, no_dispatch: list[int]) -> None:
    run = _run(owner_api, cpu_hardware, k=2)
    one = owner_api.post(f"/api/v1/runs/{run['id']}/samples/",
                         {"problem": "all-reduce", "source": VALID_SOURCE}, format="json")
    assert one.status_code == 201 and one.json()["files"][0]["index"] == 0
    archive = pack({"out/all-reduce/b.py": WRONG.encode(), "all-gather__0.py": VALID_SOURCE.encode(),
                    "all-reduce/c.py": VALID_SOURCE.encode(),  # a third for k = 2: refused
                    "broken/all-gather.py": b"def solution(:\n", "readme.txt": b"hello",
                    "nosuch-problem/0.py": VALID_SOURCE.encode(), "__MACOSX/._x.py": b"\0"})
    r = owner_api.post(f"/api/v1/runs/{run['id']}/samples/",
                       {"archive": _upload("s.zip", archive)}, format="multipart")
    assert r.status_code == 201, r.json()
    files = {f["name"]: f for f in r.json()["files"]}
    assert set(files) == {"out/all-reduce/b.py", "all-gather__0.py", "all-reduce/c.py",
                          "broken/all-gather.py", "readme.txt", "nosuch-problem/0.py"}
    assert files["out/all-reduce/b.py"]["status"] == "accepted" and files["out/all-reduce/b.py"]["index"] == 1
    assert files["all-gather__0.py"]["problem"] == "all-gather"
    assert files["all-reduce/c.py"]["code"] == "too_many_samples"
    assert files["broken/all-gather.py"]["code"] == "syntax_error"
    assert files["readme.txt"]["code"] == "not_python"
    assert files["nosuch-problem/0.py"]["code"] == "unknown_problem"
    assert r.json()["accepted"] == 2 and r.json()["rejected"] == 4
    assert Submission.objects.count() == 3
    detail = owner_api.get(f"/api/v1/runs/{run['id']}/").json()
    assert len(detail["files"]) == 7 and detail["progress"]["queued"] == 3


def _upload(name: str, data: bytes) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


@pytest.mark.parametrize("data,code,status", [
    (b"this is not an archive", "bad_archive", 400),
    (None, "too_many_files", 413),
    (None, "archive_too_large", 413),
])
def test_a_bad_archive_is_refused_whole(owner_api: Any, cpu_hardware: Any, catalog: None,
                                        no_dispatch: list[int], settings: Any, data: bytes | None,
                                        code: str, status: int) -> None:
    run = _run(owner_api, cpu_hardware)
    if code == "too_many_files":
        settings.PKB_RUN_MAX_ARCHIVE_FILES = 2
        data = pack({f"all-reduce/{i}.py": VALID_SOURCE.encode() for i in range(3)}, "tar")
    elif code == "archive_too_large":
        settings.PKB_RUN_MAX_UNPACKED_BYTES = 1000
        data = pack({"all-reduce/0.py": VALID_SOURCE.encode() * 10})
    r = owner_api.post(f"/api/v1/runs/{run['id']}/samples/", {"archive": _upload("a.zip", data)},
                       format="multipart")
    assert r.status_code == status and r.json()["error"]["code"] == code
    assert not RunSample.objects.exists() and not Submission.objects.exists()


def test_archive_entries_that_climb_out_or_link_are_not_read(owner_api: Any, cpu_hardware: Any,
                                                             catalog: None, no_dispatch: list[int]) -> None:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("../all-reduce.py", "/etc/all-reduce.py"):
            info = tarfile.TarInfo(name)
            info.size = len(VALID_SOURCE)
            tar.addfile(info, io.BytesIO(VALID_SOURCE.encode()))
        link = tarfile.TarInfo("all-reduce/0.py")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    r = owner_api.post(f"/api/v1/runs/{run_id(owner_api, cpu_hardware)}/samples/",
                       {"archive": _upload("a.tar", buf.getvalue())}, format="multipart")
    codes = sorted(f["code"] for f in r.json()["files"])
    assert codes == ["bad_path", "bad_path", "not_a_file"]


def run_id(api: Any, hardware: Any) -> int:
    return _run(api, hardware)["id"]


def test_scores_wait_for_the_run_then_match_a_hand_computation(
        owner_api: Any, cpu_hardware: Any, catalog: None, no_dispatch: list[int],
        real_report: dict[str, Any]) -> None:
    run = _run(owner_api, cpu_hardware)
    for problem, n in (("all-reduce", 3), ("all-gather", 3), ("reduce-scatter", 2)):
        for _ in range(n):
            owner_api.post(f"/api/v1/runs/{run['id']}/samples/",
                           {"problem": problem, "source": VALID_SOURCE}, format="json")
    pending = owner_api.get(f"/api/v1/runs/{run['id']}/scores/")
    assert pending.status_code == 409 and pending.json()["error"]["code"] == "run_pending"
    # (correct, speedup, interval low): intervals on some, point estimates on others.
    outcomes = {"all-reduce": [(True, 1.30, 1.10), (True, 2.40, 1.90), (False, None, None)],
                "all-gather": [(False, None, None), (True, 0.90, None), (False, None, None)],
                "reduce-scatter": [(True, 1.60, None), (True, 1.05, 0.98)]}
    for problem, tries in outcomes.items():
        subs = Submission.objects.filter(problem_version__problem__slug=problem).order_by("pk")
        for sub, (ok, speedup, low) in zip(subs, tries):
            finish(sub, real_report, correct=ok, speedup=speedup or 0.5, low=low,
                   high=None if low is None else speedup * 1.1)
    outcomes = {p: [(ok, s or 0.5, low) for ok, s, low in t] for p, t in outcomes.items()}
    body = owner_api.get(f"/api/v1/runs/{run['id']}/scores/").json()
    assert body["complete"] and body["k"] == 3
    expected = hand_scores(outcomes, 3, 3)
    suite_problems = body["suite"]["problems"]
    assert suite_problems == 10  # every loaded problem runs on the 2-rank CPU profile
    for key in ("fast_p", "pass_at_k", "fast_1_at_k"):
        assert body["run_problems"][key] == pytest.approx(expected[key]), key
        suite = {k: v * 3 / suite_problems for k, v in expected[key].items()}
        assert body["suite"][key] == pytest.approx(suite), key
    # Spelled out once: pass@3 has c=2,1,2 of n=3,3,2 (n < k: any success) -> 1 each.
    assert body["run_problems"]["pass_at_k"]["3"] == pytest.approx(1.0)
    assert body["run_problems"]["pass_at_k"]["1"] == pytest.approx((2 / 3 + 1 / 3 + 1) / 3)
    assert body["run_problems"]["fast_p"]["1"] == pytest.approx(2 / 3)  # 0.98 and 0.90 do not count
    # Each share with its 95% interval over the scope's problems: fast_1 is 2 of 3 problems
    # (Wilson's), pass@1 a mean of 2/3, 1/3 and 1 (the bootstrap).
    from portal.leaderboards.metrics import wilson_interval

    spans = body["run_problems"]["intervals"]
    assert spans["fast_p"]["1"]["method"] == "wilson"
    assert (spans["fast_p"]["1"]["low"], spans["fast_p"]["1"]["high"]) == pytest.approx(wilson_interval(2, 3))
    assert spans["pass_at_k"]["1"]["method"] == "bootstrap"
    assert spans["pass_at_k"]["1"]["low"] < body["run_problems"]["pass_at_k"]["1"] < spans["pass_at_k"]["1"]["high"]
    suite_1 = body["suite"]["intervals"]["fast_p"]["1"]  # the same 2 problems, of the suite's 10
    assert (suite_1["low"], suite_1["high"]) == pytest.approx(wilson_interval(2, 10))
    page = owner_api.get(f"/runs/{run['id']}/")
    assert page.status_code == 200 and b"value_mismatch" in page.content
    assert b"95% interval over the 3 problems" in page.content


def test_pkb_directory_names_and_numbering() -> None:
    parsed = names.parse_run_dir("solutions_cuda_bf16_h100_8_anthropic_claude-opus-4-7")
    assert (parsed.backend, parsed.precision, parsed.hardware, parsed.provider, parsed.model) == \
        ("cuda", "bf16", "h100_8", "anthropic", "claude-opus-4-7")
    assert names.parse_run_dir("solutions_triton_bf16_none_together_Qwen_Qwen3").model == "Qwen_Qwen3"
    # Ranked apart: a model's CUDA and Triton directories are two configurations, not two attempts.
    assert parsed.entry == "claude-opus-4-7"
    assert names.parse_run_dir("solutions_triton_bf16_h100_8_google_gemini-3-pro-preview").entry == \
        "gemini-3-pro-preview-triton"
    assert names.parse_run_dir("solutions_parallelkittens_bf16_h100_8_google_gemini-3-pro-preview").entry == \
        "gemini-3-pro-preview-parallelkittens"
    with pytest.raises(ValueError):
        names.parse_run_dir("my_solutions")
    # From 33 on a generated file's number is its reference's + 1; four names differ.
    assert names.parse_file("2_allgather_cuda.py").pkb_id == 2
    assert names.parse_file("34_ulysses_all_to_all_tensor_primitive_cuda.py").pkb_id == 33
    assert names.parse_file("88_conv2d_boundary_exchange_triton.py").pkb_id == 87
    assert names.parse_file("14_gemm_allscatter_cuda.py").pkb_id == 14
    assert names.parse_file("18_rms_norm_parallelkittens.py").pkb_id == 18
    assert names.parse_file("99_fancy_cuda.py").pkb_id is None
    assert names.parse_file("notes.py") is None


def test_pkb_index_reads_the_problems_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    import problems
    from portal.runs.pkb.importer import pkb_index

    tagged = tuple(dataclasses.replace(p, pkb_ids=(1,)) if p.slug == "all-reduce" else p
                   for p in problems.all_problems())
    monkeypatch.setattr(problems, "all_problems", lambda: tagged)
    assert pkb_index()[1] == ["all-reduce"]


def test_pkb_import_accounts_for_every_file(owner_api: Any, cpu_hardware: Any, catalog: None,
                                            no_dispatch: list[int], monkeypatch: pytest.MonkeyPatch,
                                            real_report: dict[str, Any]) -> None:
    monkeypatch.setattr("portal.runs.pkb.importer.pkb_index", lambda: TEST_PKB_INDEX)
    archive = pack(pkb_files(), "tar")
    r = owner_api.post("/api/v1/runs/pkb-import/", {"archive": _upload("d.tar.gz", archive),
                                                    "hardware": cpu_hardware.slug}, format="multipart")
    assert r.status_code == 201, r.json()
    body = r.json()
    assert (body["model"], body["provider"], body["backend"], body["precision"]) == \
        ("pkb-signature-model", "testlab", "cuda", "bf16")
    status = {f["name"]: (f["status"], f["code"], f["problem"], f["pkb_id"]) for f in body["files"]}
    assert status == {
        "1_allreduce_cuda.py": ("accepted", None, "all-reduce", 1),
        "2_allgather_cuda.py": ("accepted", None, "all-gather", 2),
        "3_broadcast_cuda.py": ("accepted", None, "broadcast", 3),
        "7_reducescatter_cuda.py": ("accepted", None, "reduce-scatter", 7),
        "8_alltoall_cuda.py": ("accepted", None, "all-to-all", 8),
        "16_gemm_reducescatter_cuda.py": ("accepted", None, "tp-gemm-reducescatter", 16),
        "18_rms_norm_cuda.py": ("accepted", None, "tp-rmsnorm", 18),
        "74_vocab_parallel_cross_entropy_loss_cuda.py": ("accepted", None,
                                                         "vocab-parallel-cross-entropy", 73),
        "9_layernorm_backward_cuda.py": ("rejected", "syntax_error", None, 9),
        "10_embedding_lookup_cuda.py": ("rejected", "no_adapter", "vocab-parallel-embedding", 10),
        "34_ulysses_all_to_all_tensor_primitive_cuda.py": ("accepted", None, "ulysses-all-to-all", 33),
        "72_hyena_conv1d_boundary_exchange_cuda.py": ("rejected", "unmapped", None, 71),
        "99_fancy_kernel_cuda.py": ("rejected", "unknown_pkb_problem", None, None),
        "README_notes.py": ("rejected", "not_a_pkb_file", None, None),
    }
    wrapped = Submission.objects.get(problem_version__problem__slug="all-gather").source
    assert "_pkb_solution(x).reshape(-1)" in wrapped and "def solution(x, *, group)" in wrapped
    original = (PKB_DIR / "2_allgather_cuda.py").read_text()
    assert f"_ORIGINAL = {original!r}" in wrapped  # the file itself, verbatim
    notes = {f["name"]: f["message"] for f in body["files"] if f["status"] == "accepted"}
    assert notes["3_broadcast_cuda.py"] == MULTICAST_NOTE and notes["2_allgather_cuda.py"] is None
    # A multicast file that breaks where multicast is off says so in its cell; a wrong one does not.
    for name, failure in (("3_broadcast_cuda.py", "runtime_error"), ("2_allgather_cuda.py", "crash")):
        sample = RunSample.objects.get(run_id=body["id"], name=name)
        finish(sample.submission, real_report, correct=False, speedup=0.5, failure_class=failure)
    cells = {c["name"]: c["class"] for row in matrix(Run.objects.get(pk=body["id"]))["rows"]
             for c in row["cells"] if c}
    assert cells["3_broadcast_cuda.py"] == "needs_multicast" and cells["2_allgather_cuda.py"] == "crash"
    page = owner_api.get(f"/runs/{body['id']}/").content.decode()
    for name, (state, code, _, _) in status.items():
        assert name in page and (code is None or code in page), name
    assert "v-needs_multicast" in page


def test_parallelkittens_files_are_refused_with_the_reason(
        owner_api: Any, cpu_hardware: Any, catalog: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("portal.runs.pkb.importer.pkb_index", lambda: TEST_PKB_INDEX)
    directory = PKB_DIR.parent / "solutions_parallelkittens_bf16_h100_8_testlab_pk-model"
    r = owner_api.post("/api/v1/runs/pkb-import/", {"archive": _upload("d.zip", pack(pkb_files(directory))),
                                                    "hardware": cpu_hardware.slug}, format="multipart")
    assert r.status_code == 400 and r.json()["error"]["code"] == "nothing_accepted"
    assert [f["code"] for f in r.json()["files"]] == ["needs_thunderkittens"]
    assert not Run.objects.exists() and not Submission.objects.exists()


def test_pkb_import_dry_run_stores_nothing(owner_api: Any, cpu_hardware: Any, catalog: None,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("portal.runs.pkb.importer.pkb_index", lambda: TEST_PKB_INDEX)
    r = owner_api.post("/api/v1/runs/pkb-import/?dry_run=1", {
        "archive": _upload("d.zip", pack(pkb_files())), "hardware": cpu_hardware.slug}, format="multipart")
    assert r.status_code == 200 and r.json()["model"] == "pkb-signature-model"
    fates = {f["name"]: f["code"] or f["adapter"] for f in r.json()["files"]}
    assert fates["2_allgather_cuda.py"] == "pkb2->all-gather" and fates["9_layernorm_backward_cuda.py"] == "syntax_error"
    assert not Run.objects.exists() and not Submission.objects.exists()


def test_a_pkb_import_with_nothing_to_evaluate_stores_nothing(owner_api: Any, cpu_hardware: Any,
                                                             catalog: None) -> None:
    # PKB 72 (Hyena conv boundary exchange) has only a variant here (docs/pkb-mapping.md): unmapped.
    files = {k: v for k, v in pkb_files().items() if k.endswith(("72_hyena_conv1d_boundary_exchange_cuda.py", "notes.py"))}
    r = owner_api.post("/api/v1/runs/pkb-import/", {"archive": _upload("d.zip", pack(files)),
                                                    "hardware": cpu_hardware.slug}, format="multipart")
    assert r.status_code == 400 and r.json()["error"]["code"] == "nothing_accepted"
    assert sorted(f["code"] for f in r.json()["files"]) == ["not_a_pkb_file", "unmapped"]
    unmapped = next(f["message"] for f in r.json()["files"] if f["code"] == "unmapped")
    # the related variant docs/pkb-mapping.md lists for PKB 71, and how it differs
    assert "the related variant is cp-causal-conv1d-halo" in unmapped and "zigzag" in unmapped
    assert not Run.objects.exists()


def test_an_unmapped_pkb_id_without_a_variant_says_no_equivalent_yet() -> None:
    from portal.runs.pkb.importer import unmapped_message
    from portal.runs.pkb.variants import VARIANTS

    assert 1 not in VARIANTS  # all-reduce is an equivalent, never a variant
    assert unmapped_message("PKB 1 (allreduce)", 1) == \
        "PKB 1 (allreduce) has no equivalent problem here yet (no problem lists it in pkb_ids)"


def test_scores_of_an_empty_run_say_so(owner_api: Any, cpu_hardware: Any) -> None:
    run = _run(owner_api, cpu_hardware)
    r = owner_api.get(f"/api/v1/runs/{run['id']}/scores/")
    assert r.status_code == 409 and r.json()["error"]["code"] == "run_empty"


def test_pkb_import_without_a_run_directory_name_is_refused(owner_api: Any, cpu_hardware: Any,
                                                            catalog: None, no_dispatch: list[int]) -> None:
    archive = pack({"2_allgather_cuda.py": b"def solution(tensor):\n    return tensor\n"})
    r = owner_api.post("/api/v1/runs/pkb-import/", {"archive": _upload("d.zip", archive),
                                                    "hardware": cpu_hardware.slug}, format="multipart")
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_directory"
    assert not Run.objects.exists()


def test_runs_on_cpu_are_ranked_by_problems_solved_not_by_speedup(
        owner_api: Any, client: Any, cpu_hardware: Any, all_reduce: Any, no_dispatch: list[int],
        real_report: dict[str, Any]) -> None:
    load_problems(["all-gather"])
    # broad: both problems right, neither faster than the reference; fast: one right at 3.81x
    outcomes = {"broad": [(True, 0.39), (True, 0.9)], "fast": [(True, 3.81), (False, 0.5)]}
    ids = {}
    for label, tries in outcomes.items():
        ids[label] = _run(owner_api, cpu_hardware, note=label)["id"]
        for problem in ("all-reduce", "all-gather"):
            owner_api.post(f"/api/v1/runs/{ids[label]}/samples/", {"problem": problem, "source": VALID_SOURCE},
                           format="json")
        samples = RunSample.objects.filter(run_id=ids[label]).order_by("pk")
        for sample, (ok, speedup) in zip(samples, tries):
            finish(sample.submission, real_report, correct=ok, speedup=speedup)
    body = client.get(f"/runs/?hardware={cpu_hardware.slug}&export=json").json()
    assert [r["run"] for r in body["rows"]] == [ids["broad"], ids["fast"]]
    assert body["rows"][1]["fast_1"] > body["rows"][0]["fast_1"]  # what ranked it first before
    page = client.get(f"/leaderboard/?hardware={cpu_hardware.slug}").content.decode()
    assert "Ranked by problems solved, then pass@k" in page


def test_the_board_plan_lists_what_the_dry_import_accepts(owner_api: Any, cpu_hardware: Any, catalog: None,
                                                          monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import shutil

    from portal.runs.board_plan import make_plan
    from portal.runs.scoring import MODEL_FAULTS

    monkeypatch.setattr("portal.runs.pkb.importer.pkb_index", lambda: TEST_PKB_INDEX)
    shutil.copytree(PKB_DIR.parent, tmp_path / "dirs")
    directory = tmp_path / "dirs" / PKB_DIR.name
    (directory / "2_allgather_cuda.py").write_text("def solution(x:\n")  # the model's fault, at a mapped problem
    r = owner_api.post("/api/v1/runs/pkb-import/?dry_run=1", {
        "archive": _upload("d.zip", pack(pkb_files(directory))), "hardware": cpu_hardware.slug}, format="multipart")
    accepted = sorted(f["name"] for f in r.json()["files"] if f["status"] == "accepted")
    faults = [(f["name"], f["code"], f["problem"]) for f in r.json()["files"]
              if f["code"] in MODEL_FAULTS and f["problem"]]
    plan = make_plan(tmp_path / "dirs", "test data", "abc1234")
    # The ParallelKittens directory beside it has nothing importable: not planned, as batches skip it.
    assert plan["directories"] == {PKB_DIR.name: accepted} and plan["files"] == len(accepted) == 8
    assert faults == [("2_allgather_cuda.py", "syntax_error", "all-gather")]
    assert [(f["file"], f["code"], f["problem"]) for f in plan["model_faults"][PKB_DIR.name]] == faults


def test_a_pkb_file_nested_past_pythons_parser_is_the_models_syntax_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # compile() gives up on deep nesting with MemoryError or RecursionError, not SyntaxError:
    # uncaught, such a file ended the whole import with a 500 (red team, nests_past_the_parser).
    from portal.runs.archives import Entry
    from portal.runs.pkb.importer import plans_from_pkb
    monkeypatch.setattr("portal.runs.pkb.importer.pkb_index", lambda: TEST_PKB_INDEX)
    deep = [Entry("2_allgather_cuda.py", b"def solution(x):\n    return x\nN = " + b"-" * 8000 + b"1\n"),
            Entry("2_allgather_cuda.py", b"def solution(x):\n    return x\nN = x" + b".a" * 50_000 + b"\n")]
    plans = plans_from_pkb(deep)
    assert [(p.code, p.problem) for p in plans] == [("syntax_error", "all-gather")] * 2
    assert all("nests too deeply" in p.message for p in plans)
