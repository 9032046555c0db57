"""A new user's walkthrough, 2026-11-28 (docs/portal.md, "New-user walkthrough"): a researcher, a
kernel engineer and a bot on a fresh clone. One test per defect found and fixed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from portal.submissions import workers

from .conftest import a_result

pytestmark = pytest.mark.django_db


# --- the bot: the API's root, its 404s, its pages and its throttle say what to do -------------

def test_the_api_root_lists_the_runs_endpoints(anonymous_api: Any) -> None:
    """`GET /api/v1/` is where a bot starts, and a 404 sends it there ("GET /api/v1/ lists
    them"), but it named no runs endpoint: `pkb run` was undiscoverable from the API."""
    endpoints = anonymous_api.get("/api/v1/").json()["endpoints"]
    assert endpoints["runs"] == "http://testserver/api/v1/runs/"
    assert endpoints["run_pkb_import"] == "http://testserver/api/v1/runs/pkb-import/"
    assert anonymous_api.get(endpoints["runs"]).status_code == 200


def test_the_runs_list_pages_like_every_list_and_links_absolutely(
        anonymous_api: Any, owner: Any, gpu_hardware: Any) -> None:
    """`GET runs/` gave the first 500 runs with nothing to say more existed, took a hardware
    typo for "no runs", and gave each run's `url` relative where every other link is absolute."""
    from portal.runs.models import Run
    from portal.submissions.services import get_model

    for _ in range(3):
        Run.objects.create(owner=owner, model=get_model("gpt-test"), hardware=gpu_hardware, k=1)
    body = anonymous_api.get("/api/v1/runs/?page_size=2").json()
    assert body["count"] == 3 and len(body["runs"]) == 2 and body["previous"] is None
    assert body["next"].startswith("http://testserver/api/v1/runs/?")
    rest = anonymous_api.get(body["next"]).json()
    assert len(rest["runs"]) == 1 and rest["next"] is None
    assert body["runs"][0]["url"].startswith("http://testserver/runs/")
    r = anonymous_api.get("/api/v1/runs/?hardware=h200-typo")
    assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_hardware"
    assert anonymous_api.get(f"/api/v1/runs/?hardware={gpu_hardware.slug}").json()["count"] == 3


@pytest.mark.parametrize("path, names, lists", [
    ("/api/v1/runs/999999/scores/", "run 999999", "GET /api/v1/runs/"),
    ("/api/v1/runs/999999/", "run 999999", "GET /api/v1/runs/"),
    ("/api/v1/problems/no-such-problem/", "problem 'no-such-problem'", "GET /api/v1/problems/"),
    ("/api/v1/hardware/no-such-hw/", "hardware 'no-such-hw'", "GET /api/v1/hardware/"),
    ("/api/v1/submissions/999999/", "submission 999999", "GET /api/v1/submissions/"),
])
def test_a_missing_object_is_named_with_where_to_look(anonymous_api: Any, path: str, names: str,
                                                      lists: str) -> None:
    """It read "No Run matches the given query.": Django's words, naming neither the id asked
    for nor where the real ones are (`pkb run scores 999` printed just that)."""
    r = anonymous_api.get(path)
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["code"] == "not_found"
    assert names in error["message"] and lists in error["message"], error["message"]
    assert "matches the given query" not in error["message"]


def test_a_page_past_the_end_says_how_many_pages_there_are(anonymous_api: Any,
                                                           all_reduce: Any) -> None:
    """"Invalid page." said neither why nor what to ask for instead."""
    error = anonymous_api.get("/api/v1/problems/?page=999").json()["error"]
    assert error["field"] == "page"
    assert "999" in error["message"] and "1 page" in error["message"], error["message"]
    error = anonymous_api.get("/api/v1/problems/?page=abc").json()["error"]
    assert error["field"] == "page" and "whole number" in error["message"], error["message"]


@pytest.mark.parametrize("query, field", [("solved=maybe", "solved"), ("hardware=h200-typo", "hardware"),
                                          ("solved=yes&hardware=h200-typo", "hardware"),
                                          ("category=no-such", "category"),
                                          ("collective=no-such", "collective")])
def test_a_problem_filter_the_list_does_not_know_is_refused(anonymous_api: Any, all_reduce: Any,
                                                            query: str, field: str) -> None:
    """`solved=maybe` was ignored and `hardware=<typo>&solved=yes` answered "solved anywhere":
    a bot got every problem, or the wrong ones, with a 200."""
    r = anonymous_api.get(f"/api/v1/problems/?{query}")
    assert r.status_code == 400, r.content
    error = r.json()["error"]
    assert error["field"] == field and error["code"] in ("invalid_choice", "unknown_hardware")
    assert anonymous_api.get("/api/v1/problems/?solved=no&category=collective").status_code == 200


def test_a_throttled_client_is_told_its_limit_and_how_to_get_more(anonymous_api: Any,
                                                                   settings: Any) -> None:
    """A 429 read "Request was throttled. Expected available in 23 seconds.": not which limit,
    nor that a token's user has a higher one."""
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "anon": "2/min", "user": "600/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    for _ in range(2):
        assert anonymous_api.get("/api/v1/hardware/").status_code == 200
    r = anonymous_api.get("/api/v1/hardware/")
    assert r.status_code == 429 and int(r["Retry-After"]) > 0
    message = r.json()["error"]["message"]
    assert "2 requests a minute" in message, message
    assert "600 requests a minute" in message and "token" in message, message


def test_too_many_password_guesses_are_told_the_limit(anonymous_api: Any, settings: Any,
                                                      owner: Any) -> None:
    """`POST auth/token/` (`pkb login`) answered its 429 in DRF's words too."""
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "login": "1/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    anonymous_api.post("/api/v1/auth/token/", {"username": owner.username, "password": "wrong"})
    r = anonymous_api.post("/api/v1/auth/token/", {"username": owner.username, "password": "wrong"})
    assert r.status_code == 429
    assert "An address may try 1 password a minute" in r.json()["error"]["message"]


# --- worker liveness: a page never waits for the broadcast when an answer is at hand ----------

def test_a_stale_liveness_answer_is_served_while_a_new_one_is_asked_for(
        settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`/hardware/`, `/hardware/<id>/`, the upload form and `GET /api/v1/hardware/` waited for
    Celery's broadcast (2 s on the local stack) every time the 15 s cache ran out."""
    settings.PKB_WORKER_LIVENESS_TTL_S = 15
    asked: list[float] = []
    answer = {"pkb.hw.x": 1}

    def slow_ask() -> dict[str, int]:
        asked.append(time.monotonic())
        time.sleep(0.3)
        return dict(answer)

    monkeypatch.setattr(workers, "_ask_workers", slow_ask)
    workers.forget()
    assert workers.liveness().count("pkb.hw.x") == 1 and len(asked) == 1  # nothing at hand: asked
    assert workers.liveness().count("pkb.hw.x") == 1 and len(asked) == 1  # fresh: not asked
    monkeypatch.setattr(workers.time, "time", lambda: time.time_ns() / 1e9 + 30)  # 30 s on: stale
    answer["pkb.hw.x"] = 2
    started = time.monotonic()
    assert workers.liveness().count("pkb.hw.x") == 1  # the stale answer, at once
    assert time.monotonic() - started < 0.2
    for _ in range(50):  # asked again beside the request, then served
        if workers.liveness().count("pkb.hw.x") == 2:
            break
        time.sleep(0.05)
    assert workers.liveness().count("pkb.hw.x") == 2 and len(asked) == 2
    workers.forget()


# --- the researcher: the model board, the run page, the site's URLs ---------------------------

def test_the_model_board_says_how_many_problems_each_model_tried(
        client: Any, anonymous_api: Any, owner: Any, all_reduce: Any, gpu_hardware: Any) -> None:
    """Every row read "Problems 135" whether the model tried 11 problems or 39, and unattempted
    problems count as failures: the column that says how much a score rests on was missing."""
    a_result(owner, "tried-one", gpu_hardware, all_reduce, speedup=1.2)
    rows = anonymous_api.get(f"/api/v1/leaderboards/models/?hardware={gpu_hardware.slug}").json()
    assert rows["models"][0]["attempted"] == 1
    page = client.get(f"/leaderboard/?hardware={gpu_hardware.slug}").content.decode()
    assert ">Tried<" in page
    # a share's grain: beside each share's interval, the board says what one problem is worth
    assert "Shares are out of 1 problem: one problem is 100.0 points" in page


def test_a_run_page_reads_in_words_and_human_dates(client: Any, owner: Any,
                                                   gpu_hardware: Any) -> None:
    from portal.runs.models import Run
    from portal.submissions.services import get_model

    run = Run.objects.create(owner=owner, model=get_model("gpt-test"), hardware=gpu_hardware, k=1)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "1 samples" not in page and "1 sample per problem" in page
    assert "<th>Problem</th><th>sample 0</th>" in page  # the matrix's column was headed "0"
    # the site's dates are "28 Nov 2026, 23:28 UTC" with the ISO value on hover, not 2026-11-28 23:28
    assert run.created_at.strftime("%Y-%m-%d %H:%M") not in page
    assert run.created_at.strftime("%d %b %Y") .lstrip("0") in page


def test_a_seeded_run_names_the_files_not_evaluated_yet(client: Any, owner: Any, gpu_hardware: Any,
                                                        tmp_path: Path) -> None:
    """"38 of the 40 files its directory plans have been evaluated": which two are left was
    nowhere on the page, though the plan lists every file."""
    from portal.runs.models import Run, RunSample
    from portal.submissions.services import get_model

    directory = "solutions_cuda_bf16_h100_8_testlab_model"
    (tmp_path / "plan.json").write_text(json.dumps({
        "source": "test", "planned_at_commit": "x", "date": "2026-11-28", "files": 3,
        "directories": {directory: ["1_allreduce_cuda.py", "2_allgather_cuda.py",
                                    "8_alltoall_cuda.py"]}}))
    run = Run.objects.create(owner=owner, model=get_model("gpt-test"), hardware=gpu_hardware, k=1,
                             imported_from=directory, files_planned=3,
                             seeded_from=str(tmp_path / "h200-x2-nvlink-results.jsonl"))
    RunSample.objects.create(run=run, name="1_allreduce_cuda.py", status="rejected",
                             code="syntax_error")
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="run-remaining"' in page
    remaining = page[page.index('id="run-remaining"'):]
    assert "2_allgather_cuda.py" in remaining and "8_alltoall_cuda.py" in remaining
    assert "1_allreduce_cuda.py" not in remaining.split("</details>")[0]


def test_the_api_s_plural_leaderboard_path_works_on_the_site(client: Any) -> None:
    """The API says /api/v1/leaderboards/models/ and the site /leaderboard/: a researcher who
    typed the one from the other got a 404."""
    r = client.get("/leaderboards/models/?hardware=h200-x2-nvlink")
    assert r.status_code == 301 and r["Location"] == "/leaderboard/?hardware=h200-x2-nvlink"
    assert client.get("/leaderboards/")["Location"] == "/leaderboard/"


# --- accessible markup ----------------------------------------------------------------------

def test_tables_and_charts_have_names_for_screen_readers(client: Any, owner: Any, all_reduce: Any,
                                                         gpu_hardware: Any) -> None:
    """Every table had a visible heading but no accessible name, every chart was an unnamed
    div of SVG, and the home page had two h1s."""
    a_result(owner, "tried-one", gpu_hardware, all_reduce, speedup=1.2)
    page = client.get(f"/leaderboard/?hardware={gpu_hardware.slug}").content.decode()
    assert f'<table class="data" aria-label="Models on {gpu_hardware.slug}"' in page
    assert '<div id="chart-fastp" class="chart" role="img" aria-label="fast_p of each model' in page
    home = client.get("/").content.decode()
    assert home.count("<h1") == 1


def test_every_page_date_is_a_human_date() -> None:
    """The run page's creation and a sweep's end read 2026-11-28 23:28 (no zone) where every
    other date on the site reads 28 Nov 2026, 23:28 UTC with the ISO value on hover (`when`)."""
    templates = Path(__file__).resolve().parents[2] / "templates"
    raw = [str(p.relative_to(templates)) for p in templates.rglob("*.html") if "|date:" in p.read_text()]
    assert raw == []


def test_a_submission_page_s_report_json_is_json_and_it_names_its_run(
        client: Any, owner: Any, job: tuple[Any, str], real_report: dict[str, Any]) -> None:
    """"Full report JSON" was Python's repr (None, single quotes): pasted anywhere, it did not
    parse. And a run's sample (a board result) did not link to its run, whose page says which
    commit, host and script evaluated it."""
    import html
    import re

    from portal.runs.models import Run, RunSample

    from .runs_helpers import finish

    sub, _ = job
    finish(sub, real_report, correct=True, speedup=1.1)
    run = Run.objects.create(owner=owner, model=sub.model, hardware=sub.hardware, k=1)
    RunSample.objects.create(run=run, submission=sub, problem=sub.problem_version.problem,
                             name="1_allreduce_cuda.py", index=0, status="accepted")
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    # The page links the report rather than printing it (tests/portal/test_submission_page_weight.py).
    shown = re.search(r'<a id="report-json" href="([^"]+)"', page)
    assert shown, "no link to the report JSON on the page"
    assert json.loads(client.get(html.unescape(shown.group(1))).content)["verdict"] == "pass"
    assert f'<a id="sub-run" href="/runs/{run.pk}/">run {run.pk}: ' in page


def test_the_problem_list_asks_for_solved_problems_once(client: Any, owner: Any, all_reduce: Any,
                                                        gpu_hardware: Any) -> None:
    """`solved` was an EXISTS per problem: on SQLite (`make up`) each one scanned every finished
    submission, 0.2 s of the home page's 0.24 s with the seeded board. One list, same answers."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    a_result(owner, "tried-one", gpu_hardware, all_reduce, speedup=1.2)
    with CaptureQueriesContext(connection) as queries:
        page = client.get("/").content.decode()
    listing = [q["sql"] for q in queries.captured_queries if '"solved"' in q["sql"]]
    assert listing and not any("EXISTS" in sql.upper() for sql in listing), listing
    assert 'all-reduce' in page
    assert client.get("/?solved=yes").content.decode().count('href="/problems/all-reduce/"') >= 1
    assert 'href="/problems/all-reduce/"' not in client.get("/?solved=no").content.decode()


def test_run_pages_never_load_the_reports(client: Any, owner: Any, job: tuple[Any, str],
                                          real_report: dict[str, Any]) -> None:
    """Scoring a run loaded every sample's whole report (kilobytes each), for every run on
    /runs/ and several times over on a run's page: two thirds of /runs/ on the seeded board.
    Scores, progress, the matrix and the curves read only the indexed numbers."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from portal.runs.models import Run, RunSample

    from .runs_helpers import finish

    sub, _ = job
    finish(sub, real_report, correct=True, speedup=1.1)
    run = Run.objects.create(owner=owner, model=sub.model, hardware=sub.hardware, k=1)
    RunSample.objects.create(run=run, submission=sub, problem=sub.problem_version.problem,
                             name="all-reduce.py", index=0, status="accepted")
    for url in ("/runs/", f"/runs/{run.pk}/", f"/api/v1/runs/{run.pk}/scores/"):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        heavy = [q["sql"] for q in queries.captured_queries
                 if '"submissions_submission"."report"' in q["sql"]]
        assert heavy == [], (url, heavy)


def test_the_upload_form_s_descriptions_exist(client: Any, owner: Any, all_reduce: Any,
                                              cpu_hardware: Any) -> None:
    """Each input's aria-describedby named `id_<field>_helptext`, an id no element had: a
    screen reader read neither the help text nor, beside it, what was wrong with the file."""
    import re

    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(owner)
    pages = [client.get("/submissions/upload/"), client.post("/submissions/upload/", {
        "problem": "all-reduce", "hardware": cpu_hardware.slug, "backend": "torch",
        "model": "human", "source": SimpleUploadedFile("x.py", b"x = 1\n")})]
    for r in pages:
        page = r.content.decode()
        named = {i for ids in re.findall(r'aria-describedby="([^"]+)"', page) for i in ids.split()}
        assert named, "no described inputs"
        missing = {i for i in named if f'id="{i}"' not in page}
        assert missing == set(), missing


@pytest.mark.parametrize("given", ["http://pkb.example.org/api/v1/", "http://pkb.example.org/api/v1",
                                   "http://pkb.example.org/api/", "http://pkb.example.org/"])
def test_the_client_takes_the_api_root_as_its_server(given: str) -> None:
    """`pkb prompt --server http://host/api/v1/` (the URL the site's API link shows) asked for
    /api/v1/api/v1/prompt/ and printed the portal's 404 for it."""
    from pkb_client import config
    from pkb_client.http import Api

    assert config.server(given) == "http://pkb.example.org"
    assert Api(config.server(given)).base == "http://pkb.example.org/api/v1/"


@pytest.mark.parametrize("path", ["/problems/no-such-problem/", "/runs/999999/", "/nothing/here/"])
def test_a_page_that_does_not_exist_leads_somewhere(client: Any, path: str) -> None:
    """Outside DEBUG a mistyped problem URL got Django's bare "Not Found": no navigation, no
    link, no way on from a dead end."""
    r = client.get(path)
    assert r.status_code == 404
    page = r.content.decode()
    assert "<nav" in page and "Page not found" in page and path in page
    assert 'role="search"' in page and 'href="/api/v1/"' in page


def test_headings_never_skip_a_level(client: Any, owner: Any, all_reduce: Any,
                                     gpu_hardware: Any) -> None:
    """The model board, the runs list and the comparison put h3 titles straight under the h1:
    a screen reader's list of headings showed a level missing on each."""
    import re

    a_result(owner, "tried-one", gpu_hardware, all_reduce, speedup=1.2)
    a_result(owner, "tried-two", gpu_hardware, all_reduce, speedup=1.1)
    for url in (f"/leaderboard/?hardware={gpu_hardware.slug}", "/runs/",
                f"/leaderboard/compare/?hardware={gpu_hardware.slug}", "/"):
        levels = [int(n) for n in re.findall(r"<h([1-6])[\s>]", client.get(url).content.decode())]
        jumps = [(a, b) for a, b in zip(levels, levels[1:]) if b > a + 1]
        assert levels and jumps == [], (url, levels)


def test_your_submissions_link_their_problem_and_say_cpu_is_a_smoke_test(
        client: Any, owner: Any, all_reduce: Any, cpu_hardware: Any) -> None:
    """/accounts/ listed problem and hardware as plain text, and a CPU speedup bare, where
    every other page marks CPU results a smoke test."""
    a_result(owner, "human", cpu_hardware, all_reduce, speedup=1.11)
    client.force_login(owner)
    page = client.get("/accounts/").content.decode()
    assert f'<a href="/problems/all-reduce/?hardware={cpu_hardware.slug}">all-reduce</a>' in page
    assert f'<a href="/hardware/{cpu_hardware.slug}/">{cpu_hardware.slug}</a>' in page
    assert "smoke test" in page


def test_the_comparison_page_leaves_out_a_model_that_does_not_exist(
        client: Any, owner: Any, all_reduce: Any, gpu_hardware: Any) -> None:
    """`models=gpt5.5` (a typo) was drawn as a model that scored 0% everywhere; the API refuses
    the same request (unknown_model)."""
    a_result(owner, "gpt-5.5", gpu_hardware, all_reduce, speedup=1.2)
    a_result(owner, "claude", gpu_hardware, all_reduce, speedup=1.1)
    page = client.get(f"/leaderboard/compare/?hardware={gpu_hardware.slug}"
                      "&models=gpt-5.5&models=claude&models=gpt5.5").content.decode()
    assert 'id="unknown-models"' in page and "<code>gpt5.5</code>" in page
    table = page[page.index('data-table="models"'):]
    table = table[table.index("<tbody>"):table.index("</table>")]
    assert "gpt5.5" not in table and "gpt-5.5" in table and "claude" in table


def test_every_table_of_the_site_has_a_name() -> None:
    """The tables written out in templates (a submission's timing and trials, a problem's shapes
    and roofline, a hardware profile's GPUs and links, your submissions) had no accessible name;
    those of the shared partial have the table's title."""
    import re

    templates = Path(__file__).resolve().parents[2] / "templates"
    unnamed = [f"{p.relative_to(templates)}: {t}" for p in templates.rglob("*.html")
               for t in re.findall(r"<table\b[^>]*>", p.read_text())
               if "aria-label" not in t and "aria-labelledby" not in t]
    assert unnamed == []
