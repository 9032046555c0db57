"""Message-size sweeps in the portal: asking for one, the worker's sweep callback and the secret it
keeps until then, the reaper, and the charts on the submission and problem pages."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from portal.submissions.lifecycle import reap_stuck, record_failure, record_report
from portal.submissions.models import Submission
from portal.submissions.services import create, get_model, resolve_target, task_payload

from .conftest import DATA
from .test_worker_callbacks import post

pytestmark = pytest.mark.django_db

# A sweep `pkb sweep` wrote on CPU: all-reduce at 2 ranks over 4, 16 and 64 KiB of
# solutions/broken/cpu_wrong_at_one_size.py, which fails at 16 KiB only. Made with
#   pkb sweep --problem all-reduce --solution solutions/broken/cpu_wrong_at_one_size.py \
#     --world-size 2 --sizes 4K 16K 64K --trials 2 --seed 5 --out tests/portal/data/sweep_all_reduce_cpu.json
SWEEP = json.loads((DATA / "sweep_all_reduce_cpu.json").read_text())
SWEPT_SOURCE = (Path(__file__).resolve().parents[2] / "solutions" / "broken" / "cpu_wrong_at_one_size.py").read_text()


def _cut_short(sweep: dict[str, Any]) -> dict[str, Any]:
    """``sweep`` as sweep schema 1.0 wrote one whose deadline left its 16 KiB size not run: the
    verdict said pass ("incomplete" was only a flag beside it)."""
    sweep = copy.deepcopy(sweep)
    sweep["points"][1].update(verdict=None, failure=None, timing=None, report=None,
                              skipped="the sweep's deadline (60 s) left 10 s, less than this size would need (~20 s)")
    sweep.update(verdict="pass", complete=False, failed_sizes=[])
    return sweep


@pytest.fixture
def real_report(real_report: dict[str, Any], all_reduce: Any) -> dict[str, Any]:
    """The stored report, as an evaluation of the problem's current version (it was written at an
    older one, and would file the result under that)."""
    version = all_reduce.current_version().version
    return {**real_report, "problem": {**real_report["problem"], "version": version}}


@pytest.fixture
def swept(owner: Any, all_reduce: Any, cpu_hardware: Any, no_dispatch: list[int]) -> tuple[Submission, str]:
    """A submission of the swept file that asked for a sweep, and its worker secret."""
    sub = create(user=owner, target=resolve_target("all-reduce", cpu_hardware.slug), backend="torch",
                 model=get_model("sweeper"), text=SWEPT_SOURCE, origin="upload", sweep=True)
    token = sub.new_token()
    sub.save()
    return sub, token


# -- asking for a sweep -------------------------------------------------------------------------
def test_the_api_takes_a_sweep_request_and_the_job_carries_it(owner_api: Any, all_reduce: Any, cpu_hardware: Any,
                                                              no_dispatch: list[int], settings: Any) -> None:
    r = owner_api.post("/api/v1/submissions/", {"problem": "all-reduce", "hardware": cpu_hardware.slug,
                                                "source": SWEPT_SOURCE, "sweep": True}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["sweep_status"] == "waiting" and r.json()["sweep"] is None
    job = task_payload(Submission.objects.get(pk=r.json()["id"]), "t")
    assert job["sweep"] is True and job["sweep_sizes"] == settings.PKB_SWEEP_SIZES_CPU
    assert job["sweep_timeout_s"] == settings.PKB_SWEEP_TIMEOUT_S and job["sweep_base"] == "small"


def test_gpu_hardware_sweeps_the_problems_own_sizes(owner_api: Any, all_reduce: Any, gpu_hardware: Any,
                                                    no_dispatch: list[int]) -> None:
    r = owner_api.post("/api/v1/submissions/", {"problem": "all-reduce", "hardware": gpu_hardware.slug,
                                                "source": SWEPT_SOURCE, "sweep": True}, format="json")
    job = task_payload(Submission.objects.get(pk=r.json()["id"]), "t")
    assert job["sweep"] is True and job["sweep_sizes"] is None and job["sweep_base"] is None


def test_without_a_request_there_is_no_sweep(owner_api: Any, all_reduce: Any, cpu_hardware: Any,
                                             no_dispatch: list[int]) -> None:
    r = owner_api.post("/api/v1/submissions/", {"problem": "all-reduce", "hardware": cpu_hardware.slug,
                                                "source": SWEPT_SOURCE}, format="json")
    assert r.json()["sweep_status"] == ""
    job = task_payload(Submission.objects.get(pk=r.json()["id"]), "t")
    assert job["sweep"] is False and job["sweep_sizes"] is None


def test_a_problem_without_a_sweep_axis_refuses_the_request(owner_api: Any, cpu_hardware: Any,
                                                            no_dispatch: list[int]) -> None:
    import problems
    from portal.catalog.services import LoadResult, upsert_problem

    p = problems.get("tp-summa-2d-linear")
    upsert_problem(p, problems.source_text(p), problems.version(p), LoadResult())
    cpu_hardware.world_size = 4
    cpu_hardware.save()
    r = owner_api.post("/api/v1/submissions/", {"problem": p.slug, "hardware": cpu_hardware.slug,
                                                "source": SWEPT_SOURCE, "sweep": True}, format="json")
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "no_sweep_axis" and r.json()["error"]["field"] == "sweep"
    assert "declares no message-size sweep axis" in r.json()["error"]["message"]
    assert not Submission.objects.exists()  # nothing half-stored


def test_the_upload_form_offers_the_sweep(client: Any, owner: Any, all_reduce: Any, cpu_hardware: Any,
                                          no_dispatch: list[int]) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(owner)
    assert b'name="sweep"' in client.get("/submissions/upload/").content
    r = client.post("/submissions/upload/", {"problem": "all-reduce", "hardware": cpu_hardware.slug, "backend": "torch",
                                 "model": "human", "sweep": "on",
                                 "source": SimpleUploadedFile("k.py", SWEPT_SOURCE.encode())})
    assert r.status_code == 302
    assert Submission.objects.get().sweep_status == "waiting"


# -- the secret lasts until the sweep -----------------------------------------------------------
def test_a_passing_evaluation_keeps_the_secret_for_the_sweep(anonymous_api: Any, swept: Any,
                                                             real_report: dict[str, Any]) -> None:
    sub, token = swept
    assert post(anonymous_api, sub, "report", token, {"report": real_report}).status_code == 200
    sub.refresh_from_db()
    assert sub.status == "finished" and sub.sweep_status == "running" and sub.token_hash
    # The evaluation is over: its messages are refused, only the sweep may follow.
    assert post(anonymous_api, sub, "report", token, {"report": real_report}).status_code == 409
    assert post(anonymous_api, sub, "status", token, {"status": "running"}).status_code == 409
    r = post(anonymous_api, sub, "sweep", token, {"sweep": SWEEP, "worker": "w9"})
    assert r.status_code == 200, r.content
    sub.refresh_from_db()
    assert sub.sweep_status == "finished" and sub.sweep == SWEEP and sub.sweep_finished_at
    assert not sub.token_hash and sub.worker == "w9"
    assert post(anonymous_api, sub, "sweep", token, {"sweep": SWEEP}).status_code == 409
    detail = anonymous_api.get(f"/api/v1/submissions/{sub.pk}/").json()
    assert detail["sweep_status"] == "finished" and detail["sweep"]["failed_sizes"] == [16384]


def test_a_failing_evaluation_skips_the_sweep_and_spends_the_secret(swept: Any, real_report: dict[str, Any]) -> None:
    sub, _ = swept
    record_report(sub.pk, {**real_report, "verdict": "fail"})
    sub.refresh_from_db()
    assert sub.sweep_status == "skipped" and not sub.token_hash
    assert "did not pass" in sub.sweep_reason


def test_an_evaluation_without_a_report_skips_the_sweep(swept: Any) -> None:
    sub, _ = swept
    record_failure(sub.pk, "worker lost")
    sub.refresh_from_db()
    assert sub.sweep_status == "skipped" and "no report" in sub.sweep_reason


def _running(sub: Submission, report: dict[str, Any]) -> Submission:
    record_report(sub.pk, report)
    sub.refresh_from_db()
    assert sub.sweep_status == "running"
    return sub


def test_a_worker_error_fails_the_sweep_with_its_output(anonymous_api: Any, swept: Any,
                                                        real_report: dict[str, Any]) -> None:
    sub, token = swept
    _running(sub, real_report)
    r = post(anonymous_api, sub, "sweep", token, {"error": "pkb sweep exited with code 1", "output": "Traceback ..."})
    assert r.status_code == 200
    sub.refresh_from_db()
    assert sub.sweep_status == "failed" and "exited with code 1" in sub.sweep_reason
    assert "Traceback" in sub.sweep_reason and not sub.token_hash


@pytest.mark.parametrize("change, words", [
    (lambda s: s["points"][0].pop("size"), "sweep schema"),
    (lambda s: s["points"][0]["report"].pop("verdict"), "points/0/report does not match the evaluator's report schema"),
    (lambda s: s["problem"].update(slug="all-gather"), "not of this submission's problem all-reduce"),
    (lambda s: s["setting"].update(world_size=4), "not the submission's 2"),
    (lambda s: s["solution"].update(sha256="0" * 64), "another file"),
    (lambda s: s.update(_cut_short(s)), "says pass, but not every size ran and passed"),
])
def test_a_sweep_that_is_not_this_submissions_is_refused_and_said(anonymous_api: Any, swept: Any,
                                                                  real_report: dict[str, Any], change: Any,
                                                                  words: str) -> None:
    sub, token = swept
    _running(sub, real_report)
    bad = copy.deepcopy(SWEEP)
    change(bad)
    r = post(anonymous_api, sub, "sweep", token, {"sweep": bad})
    # The message, whatever the API's error shape around it.
    assert r.status_code == 400 and words in r.content.decode()
    sub.refresh_from_db()
    assert sub.sweep_status == "failed" and words in sub.sweep_reason and sub.sweep is None


def test_not_a_sweep_at_all_is_a_400(anonymous_api: Any, swept: Any, real_report: dict[str, Any]) -> None:
    sub, token = swept
    _running(sub, real_report)
    assert post(anonymous_api, sub, "sweep", token, {"sweep": {"verdict": "pass"}}).status_code == 400
    assert post(anonymous_api, sub, "sweep", token, {}).status_code == 400
    sub.refresh_from_db()
    assert sub.sweep_status == "running"  # the worker may still send the real one


def test_the_reaper_fails_a_sweep_whose_worker_went_silent(swept: Any, real_report: dict[str, Any],
                                                           settings: Any) -> None:
    sub, _ = swept
    _running(sub, real_report)
    assert reap_stuck() == 0
    later = timezone.now() + timedelta(seconds=settings.PKB_SWEEP_TIMEOUT_S + settings.PKB_RUN_GRACE_S + 1)
    assert reap_stuck(later) == 1
    sub.refresh_from_db()
    assert sub.sweep_status == "failed" and "sent no sweep" in sub.sweep_reason and not sub.token_hash


# -- pages --------------------------------------------------------------------------------------
def _finished_sweep(sub: Submission, report: dict[str, Any]) -> Submission:
    sub = _running(sub, report)
    from portal.submissions.lifecycle import record_sweep

    return record_sweep(sub.pk, SWEEP)


def _json_script(html: str, element_id: str) -> Any:
    start = html.index(f'id="{element_id}"')
    start = html.index(">", start) + 1
    return json.loads(html[start:html.index("</script>", start)])


def test_the_submission_page_shows_the_sweep_table_and_chart_data(client: Any, swept: Any,
                                                                  real_report: dict[str, Any]) -> None:
    sub, _ = swept
    _finished_sweep(sub, real_report)
    html = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert 'id="sweep-table"' in html and "fail: value_mismatch" in html and "Failed at 16.00 KiB" in html
    chart = _json_script(html, "data-sweep")
    assert chart["candidate"]["x"] == [4096, 65536] and chart["failed"] == [{"x": 16384, "failure_class": "value_mismatch"}]
    assert len(chart["reference"]["x"]) == 2 and len(chart["roofline"]["y"]) == 2
    assert len(chart["speedup"]["low"]) == len(chart["speedup"]["y"]) == 2
    assert all(lo <= y <= hi for lo, y, hi in zip(chart["speedup"]["low"], chart["speedup"]["y"], chart["speedup"]["high"]))
    assert "pkb/sweeps.js" in html


def test_a_stored_pass_with_sizes_not_run_reads_incomplete_on_the_page_and_in_the_api(
        client: Any, anonymous_api: Any, swept: Any, real_report: dict[str, Any]) -> None:
    # Sweeps stored before sweep schema 1.1 (the schema now refuses a pass with sizes not run).
    sub, _ = swept
    sub = _running(sub, real_report)
    Submission.objects.filter(pk=sub.pk).update(sweep=_cut_short(SWEEP), sweep_status="finished")
    html = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert 'id="sweep-verdict">incomplete</strong>' in html and "1 of 3 sizes were not run and none failed" in html
    assert 'class="ok" id="sweep-verdict"' not in html
    detail = anonymous_api.get(f"/api/v1/submissions/{sub.pk}/").json()
    assert detail["sweep"]["verdict"] == "incomplete" and detail["sweep"]["complete"] is False


def test_the_submission_page_says_why_a_sweep_is_missing(client: Any, swept: Any, real_report: dict[str, Any]) -> None:
    sub, _ = swept
    record_report(sub.pk, {**real_report, "verdict": "fail"})
    html = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert 'id="sweep-status"' in html and "not run" in html and "did not pass" in html
    assert 'id="data-sweep"' not in html


def test_the_problem_page_draws_the_reference_the_roofline_and_the_best_sweeps(
        client: Any, swept: Any, real_report: dict[str, Any], cpu_hardware: Any) -> None:
    sub, _ = swept
    _finished_sweep(sub, real_report)
    cpu_hardware.profile = {"kind": "cpu", "roofline": {"link_gbps": 1.0, "hbm_gbps": 10.0, "tflops": {"float32": 0.1}}}
    cpu_hardware.save()
    html = client.get(f"/problems/all-reduce/?hardware={cpu_hardware.slug}").content.decode()
    chart = _json_script(html, "data-problem-sweep")
    assert chart["reference"]["x"] == [4096, 65536] and chart["reference_submission"] == sub.pk
    assert [c["submission"] for c in chart["candidates"]] == [sub.pk] and chart["candidates"][0]["label"].startswith("sweeper")
    # The roofline at every declared size, from the problem's traffic at the profile's rates:
    # all-reduce moves 2(n-1)/n of the buffer per rank, so its busbw is the link rate itself.
    assert len(chart["roofline"]["x"]) == 9 and chart["roofline"]["y"] == pytest.approx([1.0] * 9)
    assert 'id="chart-problem-sweep"' in html and f"#{sub.pk}</a>, the latest on" in html


def test_the_problem_page_shows_the_roofline_before_any_sweep(client: Any, all_reduce: Any, gpu_hardware: Any) -> None:
    html = client.get(f"/problems/all-reduce/?hardware={gpu_hardware.slug}").content.decode()
    chart = _json_script(html, "data-problem-sweep")
    assert chart["candidates"] == [] and chart["reference"]["x"] == []
    assert chart["roofline"]["y"] == pytest.approx([400.0] * 9)  # link-bound at every size
    assert "No sweep has run on h200-x4-test yet" in html


def test_the_problem_page_adds_the_hardware_probes_curve_of_the_collective(client: Any, all_reduce: Any,
                                                                          gpu_hardware: Any) -> None:
    rows = [{"bytes": 1024, "busbw_gbps": 0.05}, {"bytes": 2**20, "busbw_gbps": 57.0}]
    gpu_hardware.profile = {**gpu_hardware.profile, "nccl": {"backend": "nccl", "world_size": 4, "dtype": "bfloat16",
                                                             "results": {"all_reduce": rows, "all_gather": []}}}
    gpu_hardware.save()
    html = client.get(f"/problems/all-reduce/?hardware={gpu_hardware.slug}").content.decode()
    probe = _json_script(html, "data-problem-sweep")["probe"]
    assert probe["x"] == [1024, 2**20] and probe["y"] == [0.05, 57.0]
    assert probe["label"] == "nccl all_reduce (hardware probe, bfloat16)" and "pkb probe" in html
    # Measured at another world size, the probe's curve is not this problem's.
    gpu_hardware.profile["nccl"]["world_size"] = 8
    gpu_hardware.save()
    html = client.get(f"/problems/all-reduce/?hardware={gpu_hardware.slug}").content.decode()
    assert "probe" not in _json_script(html, "data-problem-sweep")


# -- seeding committed sweeps --------------------------------------------------------------------
def test_a_committed_sweep_attaches_to_the_evaluation_of_the_same_file(tmp_path: Path, all_reduce: Any,
                                                                       cpu_hardware: Any, real_report: Any) -> None:
    from portal.submissions.importing import import_results

    sweep = {**SWEEP, "hardware_profile": cpu_hardware.slug}
    report = {**real_report, "hardware_profile": cpu_hardware.slug, "solution": SWEEP["solution"]}
    (tmp_path / "eval.json").write_text(json.dumps({"model": "human", "reports": [report]}))
    (tmp_path / "sweeps.json").write_text(json.dumps({"sweeps": [sweep]}))
    result = import_results(tmp_path, tmp_path)
    assert result.errors == [] and result.imported == ["eval.json#0", "sweeps.json#sweep0"]
    sub = Submission.objects.get()
    assert sub.sweep_status == "finished" and sub.sweep == sweep and sub.sweep_finished_at
    again = import_results(tmp_path, tmp_path)
    assert again.imported == [] and again.skipped == ["eval.json#0", "sweeps.json#sweep0"]


def test_a_committed_sweep_without_its_evaluation_is_an_error(tmp_path: Path, all_reduce: Any,
                                                              cpu_hardware: Any) -> None:
    from portal.submissions.importing import import_results

    (tmp_path / "sweep.json").write_text(json.dumps({**SWEEP, "hardware_profile": cpu_hardware.slug}))
    result = import_results(tmp_path, tmp_path)
    assert result.imported == [] and len(result.errors) == 1
    assert "no finished evaluation of this file" in result.errors[0] and "commit its pkb eval report" in result.errors[0]


def test_the_api_tells_bots_the_sweep_axis(anonymous_api: Any, all_reduce: Any) -> None:
    axis = anonymous_api.get("/api/v1/problems/all-reduce/").json()["current"]["sweep"]
    assert axis["param"] == "numel" and axis["collective"] == "all_reduce"
    assert axis["bytes"][0] == 4096 and axis["bytes"][-1] == 256 * 2**20
    assert [r["message_bytes"] for r in axis["points"]["2"]["rows"]] == axis["bytes"]
