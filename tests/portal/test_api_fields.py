"""The same field means the same thing everywhere; the API root and the docs answer everyone."""

from __future__ import annotations

from typing import Any

import pytest

from portal.submissions.lifecycle import record_report
from portal.submissions.services import create, get_model, resolve_target

from .conftest import VALID_SOURCE, lucky_and_steady

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(owner: Any, all_reduce: Any, cpu_hardware: Any, real_report: dict[str, Any]) -> Any:
    sub = create(user=owner, target=resolve_target("all-reduce", cpu_hardware.slug),
                 backend="torch", model=get_model("gpt-test"), text=VALID_SOURCE, origin="upload")
    assert sub.dtype == ""  # the problem's default until it runs
    return record_report(sub.pk, real_report, "w1")


def test_solved_is_the_same_in_the_list_and_the_detail(anonymous_api: Any, finished: Any,
                                                        cpu_hardware: Any, gpu_hardware: Any) -> None:
    for query in ("", f"?hardware={cpu_hardware.slug}", f"?hardware={gpu_hardware.slug}"):
        sep = "&" if query else "?"
        listed = anonymous_api.get(f"/api/v1/problems/{query}{sep}q=all-reduce").json()["results"][0]
        detail = anonymous_api.get(f"/api/v1/problems/all-reduce/{query}").json()
        assert listed["solved"] is detail["solved"], query
    assert anonymous_api.get("/api/v1/problems/all-reduce/").json()["solved"] is True
    assert anonymous_api.get(f"/api/v1/problems/all-reduce/?hardware={gpu_hardware.slug}").json()[
        "solved"] is False


def test_a_finished_submission_says_its_dtype(anonymous_api: Any, finished: Any) -> None:
    assert finished.dtype == "bfloat16"
    assert anonymous_api.get(f"/api/v1/submissions/{finished.pk}/").json()["dtype"] == "bfloat16"


def test_links_are_absolute_like_the_pagination(owner_api: Any, finished: Any, cpu_hardware: Any) -> None:
    problems = owner_api.get("/api/v1/problems/?page_size=1").json()
    assert problems["results"][0]["url"] == "http://testserver/api/v1/problems/all-reduce/"
    mine = owner_api.get("/api/v1/submissions/").json()["results"][0]
    assert mine["url"] == f"http://testserver/api/v1/submissions/{finished.pk}/"
    hw = owner_api.get("/api/v1/hardware/").json()["results"][0]
    assert hw["url"].startswith("http://testserver/api/v1/hardware/")
    create(user=finished.user, target=resolve_target("all-reduce", cpu_hardware.slug),
           backend="torch", model=get_model("gpt-test"), text=VALID_SOURCE, origin="upload")
    page = owner_api.get("/api/v1/submissions/?page_size=1").json()
    assert page["next"].startswith("http://testserver/api/v1/submissions/?")


def test_the_api_root_lists_the_endpoints(anonymous_api: Any) -> None:
    r = anonymous_api.get("/api/v1/")
    assert r.status_code == 200
    body = r.json()
    assert body["endpoints"]["problems"] == "http://testserver/api/v1/problems/"
    assert body["schema"] == "http://testserver/api/schema/"
    for url in body["endpoints"].values():
        if "{" not in url and not any(w in url for w in ("token", "submissions", "pkb-import")):
            assert anonymous_api.get(url).status_code in (200, 400), url


def test_the_docs_are_not_throttled(anonymous_api: Any, settings: Any) -> None:
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "anon": "1/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    for url in ("/api/docs/", "/api/redoc/", "/api/schema/") * 3:
        assert anonymous_api.get(url).status_code == 200, url


def test_redoc_loads_no_web_fonts(anonymous_api: Any) -> None:
    page = anonymous_api.get("/api/redoc/").content.decode()
    assert "fonts.googleapis" not in page and "https://" not in page


def test_a_human_upload_is_credited_to_its_uploader(anonymous_api: Any, client: Any, other: Any,
                                                    all_reduce: Any, cpu_hardware: Any,
                                                    real_report: dict[str, Any]) -> None:
    from portal.submissions.models import AIModel

    AIModel.objects.create(name="human", kind="human", provider="PKB team (hand-written)")
    sub = create(user=other, target=resolve_target("all-reduce", cpu_hardware.slug),
                 backend="torch", model=get_model("human"), text=VALID_SOURCE, origin="upload")
    ran = {**real_report, "problem": {**real_report["problem"], "version": sub.problem_version.version}}
    record_report(sub.pk, ran, "w1")
    body = anonymous_api.get(f"/api/v1/submissions/{sub.pk}/").json()
    assert body["credited_to"] == "other" and body["provider"] == ""
    board = anonymous_api.get(f"/api/v1/leaderboards/problems/all-reduce/?hardware={cpu_hardware.slug}")
    rows = [r for r in board.json()["rows"] if r["model"] == "human"]
    assert [r["credit"] for r in rows] == ["other"]
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert 'by <span id="credit">other</span>' in page and "PKB team" not in page


def test_the_docs_allow_only_this_site_and_redoc_has_no_remote_logo(anonymous_api: Any) -> None:
    for url in ("/api/docs/", "/api/redoc/"):
        policy = anonymous_api.get(url)["Content-Security-Policy"]
        assert "default-src 'self'" in policy and "https:" not in policy
    bundle = anonymous_api.get("/api/redoc-assets/bundles/redoc.standalone.js")
    assert bundle.status_code == 200 and b"cdn.redoc.ly" not in bundle.content
    assert b"/static/pkb/favicon.svg" in bundle.content
    assert b"/api/redoc-assets/bundles/redoc.standalone.js" in anonymous_api.get("/api/redoc/").content


def test_the_leaderboards_say_how_they_are_ranked_and_cpu_ranks_by_correctness(
        anonymous_api: Any, owner: Any, all_reduce: Any, cpu_hardware: Any, gpu_hardware: Any) -> None:
    for hardware in (cpu_hardware, gpu_hardware):
        lucky_and_steady(owner, all_reduce, hardware)

    def board(url: str, hardware: Any) -> dict[str, Any]:
        r = anonymous_api.get(url, {"hardware": hardware.slug})
        assert r.status_code == 200, r.content
        return r.json()

    models = "/api/v1/leaderboards/models/"
    cpu, gpu = board(models, cpu_hardware), board(models, gpu_hardware)
    assert (cpu["ranked_by"], [m["model"] for m in cpu["models"]]) == ("correctness", ["steady", "lucky"])
    assert (gpu["ranked_by"], [m["model"] for m in gpu["models"]]) == ("fast_1", ["lucky", "steady"])
    assert set(cpu["models"][0]) == set(gpu["models"][0])  # the same fields on both: none removed
    problem = "/api/v1/leaderboards/problems/all-reduce/"
    cpu, gpu = board(problem, cpu_hardware), board(problem, gpu_hardware)
    assert cpu["ranked_by"] == "correctness"
    assert [(r["model"], r["speedup"], r["rank"]) for r in cpu["rows"]] == [("steady", 0.39, None),
                                                                           ("lucky", 3.81, None)]
    assert gpu["ranked_by"] == "speedup"
    assert [(r["model"], r["speedup"], r["rank"]) for r in gpu["rows"]] == [("lucky", 3.81, 1), ("steady", 2.0, 2)]
    compare = anonymous_api.get("/api/v1/compare/", {"hardware": cpu_hardware.slug, "models": "lucky,steady"}).json()
    assert compare["ranked_by"] == compare["charts"]["ranked_by"] == "correctness"
    assert [m["model"] for m in compare["models"]] == ["steady", "lucky"]
