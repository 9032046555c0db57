"""Every API error has one shape: {"error": {"code", "message", "field"}}, and the schema says so."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from portal.submissions.models import Submission
from portal.submissions.workers import Liveness

from .conftest import VALID_SOURCE

pytestmark = pytest.mark.django_db


def error_of(response: Any, status: int) -> dict[str, Any]:
    """The error object of a refusal, after checking the status and the exact shape."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert {"code", "message", "field"} <= set(error), error
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]
    assert error["field"] is None or isinstance(error["field"], str)
    return error


@pytest.fixture
def target(all_reduce: Any, cpu_hardware: Any) -> dict[str, str]:
    return {"problem": "all-reduce", "hardware": cpu_hardware.slug}


def upload(**fields: Any) -> dict[str, Any]:
    return {"source": SimpleUploadedFile("solution.py", VALID_SOURCE.encode()), **fields}


@pytest.fixture
def no_live_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker's answer: no worker serves any queue. Said here, not assumed: the real test
    worker (celery_worker_process), once a test in this process has started it, serves the test
    CPU's queue until the session ends."""
    monkeypatch.setattr("portal.submissions.services.liveness", lambda: Liveness(True, {}))


def test_a_missing_required_field_names_it(owner_api: Any, all_reduce: Any, gpu_hardware: Any,
                                           cpu_hardware: Any, no_live_worker: None) -> None:
    # two hardware rows and no worker on either: no obvious choice, so `hardware` is required
    r = owner_api.post("/api/v1/submissions/", upload(problem="all-reduce"), format="multipart")
    error = error_of(r, 400)
    assert error["code"] == "missing_field" and error["field"] == "hardware"
    assert not Submission.objects.exists()


def test_an_unknown_problem_without_hardware_is_named_as_unknown(owner_api: Any, all_reduce: Any,
                                                                gpu_hardware: Any,
                                                                cpu_hardware: Any) -> None:
    # two hardware rows, so hardware is not obvious: the problem's name is still the first fault
    r = owner_api.post("/api/v1/submissions/", upload(problem="nope"), format="multipart")
    error = error_of(r, 400)
    assert error["code"] == "unknown_problem" and error["field"] == "problem"
    assert "'nope'" in error["message"]
    assert not Submission.objects.exists()


def test_an_unknown_backend_is_an_invalid_choice(owner_api: Any, target: dict[str, str]) -> None:
    r = owner_api.post("/api/v1/submissions/", upload(backend="jax", **target), format="multipart")
    error = error_of(r, 400)
    assert error["code"] == "invalid_choice" and error["field"] == "backend"
    assert "jax" in error["message"]


def test_several_bad_fields_are_all_listed(owner_api: Any, target: dict[str, str]) -> None:
    r = owner_api.post("/api/v1/submissions/", upload(backend="jax", model="x" * 101, **target),
                       format="multipart")
    error = error_of(r, 400)
    assert {d["field"] for d in error["details"]} == {"backend", "model"}


def test_a_wrong_password_at_the_token_endpoint(anonymous_api: Any, owner: Any) -> None:
    r = anonymous_api.post("/api/v1/auth/token/", {"username": "owner", "password": "nope"})
    error = error_of(r, 400)
    assert error["code"] == "bad_credentials" and error["field"] is None


def test_a_token_request_without_a_password(anonymous_api: Any, owner: Any) -> None:
    error = error_of(anonymous_api.post("/api/v1/auth/token/", {"username": "owner"}), 400)
    assert error["code"] == "missing_field" and error["field"] == "password"


def test_compare_with_repeated_models_works_and_with_one_model_refuses(
        anonymous_api: Any, cpu_hardware: Any) -> None:
    from portal.submissions.models import AIModel

    AIModel.objects.create(name="a", kind="model")
    AIModel.objects.create(name="b", kind="model")
    ok = anonymous_api.get(f"/api/v1/compare/?hardware={cpu_hardware.slug}&models=a&models=b")
    assert ok.status_code == 200, ok.content
    assert [row["model"] for row in ok.json()["models"]] == ["a", "b"]
    error = error_of(anonymous_api.get(f"/api/v1/compare/?hardware={cpu_hardware.slug}&models=a"), 400)
    assert error["code"] == "too_few_models" and error["field"] == "models"


def test_compare_with_an_unknown_model(anonymous_api: Any, cpu_hardware: Any) -> None:
    from portal.submissions.models import AIModel

    AIModel.objects.create(name="a", kind="model")
    r = anonymous_api.get(f"/api/v1/compare/?hardware={cpu_hardware.slug}&models=a,nope")
    error = error_of(r, 400)
    assert error["code"] == "unknown_model" and "nope" in error["message"]


def test_prompt_for_an_unknown_problem(anonymous_api: Any, all_reduce: Any, cpu_hardware: Any) -> None:
    error = error_of(anonymous_api.get("/api/v1/prompt/?problem=nope"), 400)
    assert error["code"] == "unknown_problem" and error["field"] == "problem"


def test_prompt_without_a_problem(anonymous_api: Any, all_reduce: Any, cpu_hardware: Any) -> None:
    error = error_of(anonymous_api.get("/api/v1/prompt/"), 400)
    assert error["code"] == "missing_field" and error["field"] == "problem"


def test_prompt_with_a_bad_backend(anonymous_api: Any, all_reduce: Any, cpu_hardware: Any) -> None:
    error = error_of(anonymous_api.get("/api/v1/prompt/?problem=all-reduce&backend=jax"), 400)
    assert error["code"] == "invalid_choice" and error["field"] == "backend"


def test_an_unknown_hardware_on_a_leaderboard(anonymous_api: Any, all_reduce: Any) -> None:
    error = error_of(anonymous_api.get("/api/v1/leaderboards/models/?hardware=nope"), 400)
    assert error["code"] == "unknown_hardware" and error["field"] == "hardware"


def test_a_missing_object_is_not_found(anonymous_api: Any, all_reduce: Any) -> None:
    for url in ("/api/v1/problems/nope/", "/api/v1/hardware/nope/", "/api/v1/submissions/999999/",
                "/api/v1/leaderboards/problems/nope/"):
        assert error_of(anonymous_api.get(url), 404)["code"] == "not_found", url


def test_an_unknown_api_path_is_not_found_in_the_same_shape(anonymous_api: Any) -> None:
    assert error_of(anonymous_api.get("/api/v1/no-such-endpoint/"), 404)["code"] == "not_found"


def test_a_post_with_a_session_cookie_and_no_csrf_token_gets_json(owner: Any) -> None:
    """Found by the fuzzer: a POST to a path no route matches (a negative id), sent with a session
    cookie, met Django's CSRF check before the catch-all and came back as an HTML page."""
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    assert error_of(browser.post("/api/v1/runs/-4/samples/", {"x": "1"}), 404)["code"] == "not_found"
    refused = error_of(browser.post("/api/v1/submissions/", {"problem": "all-reduce"}), 403)
    assert "CSRF" in refused["message"]


def test_the_csrf_failure_view_answers_the_api_in_its_error_shape(rf: Any) -> None:
    from portal.api.errors import csrf_failure

    response = csrf_failure(rf.post("/api/v1/anything/"), reason="CSRF cookie not set.")
    response.json = lambda: json.loads(response.content)  # as the test client's responses have
    error = error_of(response, 403)
    assert error["code"] == "csrf_failed" and "Token" in error["message"]
    page = csrf_failure(rf.post("/accounts/login/"), reason="CSRF cookie not set.")
    assert page.status_code == 403 and page["Content-Type"].startswith("text/html")


def test_no_credentials(anonymous_api: Any) -> None:
    r = anonymous_api.get("/api/v1/submissions/")
    assert error_of(r, 401)["code"] == "not_authenticated"
    assert r["WWW-Authenticate"].startswith("Token")


def test_a_bad_token(anonymous_api: Any) -> None:
    anonymous_api.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert error_of(anonymous_api.get("/api/v1/submissions/"), 401)["code"] == "authentication_failed"


def test_a_wrong_method(owner_api: Any, all_reduce: Any) -> None:
    assert error_of(owner_api.delete("/api/v1/problems/"), 405)["code"] == "method_not_allowed"


def test_malformed_json(owner_api: Any) -> None:
    r = owner_api.post("/api/v1/submissions/", "{not json", content_type="application/json")
    assert error_of(r, 400)["code"] == "parse_error"


def test_throttling_says_when_to_come_back(anonymous_api: Any, settings: Any, all_reduce: Any) -> None:
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "anon": "1/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    assert anonymous_api.get("/api/v1/problems/").status_code == 200
    r = anonymous_api.get("/api/v1/problems/")
    assert error_of(r, 429)["code"] == "throttled"
    assert 0 < int(r["Retry-After"]) <= 60


def test_the_daily_cap(owner_api: Any, target: dict[str, str], settings: Any) -> None:
    settings.PKB_DAILY_SUBMISSION_CAP = 0
    r = owner_api.post("/api/v1/submissions/", upload(**target), format="multipart")
    assert error_of(r, 429)["code"] == "daily_cap"


def test_a_refused_source(owner_api: Any, target: dict[str, str]) -> None:
    r = owner_api.post("/api/v1/submissions/", {"source": "def helper(): pass\n", **target},
                       format="json")
    error = error_of(r, 400)
    assert error["code"] == "missing_solution" and error["field"] == "source"


def test_worker_callbacks_with_a_bad_secret(anonymous_api: Any, owner: Any, target: dict[str, str],
                                            no_dispatch: list[int]) -> None:
    from portal.submissions.services import submit

    sub = submit(user=owner, problem="all-reduce", hardware=target["hardware"], backend="torch",
                 model="human", source=VALID_SOURCE.encode())
    anonymous_api.credentials(HTTP_AUTHORIZATION="Worker wrong")
    r = anonymous_api.post(f"/api/v1/worker/submissions/{sub.pk}/status/", {"status": "running"},
                           format="json")
    assert error_of(r, 403)["code"] == "permission_denied"
    r = anonymous_api.post("/api/v1/worker/submissions/999999/status/", {"status": "running"},
                           format="json")
    assert error_of(r, 404)["code"] == "not_found"


def test_the_schema_documents_the_error_shape(anonymous_api: Any) -> None:
    schema = anonymous_api.get("/api/schema/?format=json").json()
    error = schema["components"]["schemas"]["Error"]
    assert set(error["properties"]) == {"error"}
    inner = schema["components"]["schemas"][error["properties"]["error"]["$ref"].rsplit("/", 1)[1]]
    assert {"code", "message", "field"} <= set(inner["properties"])
    post = schema["paths"]["/api/v1/submissions/"]["post"]["responses"]
    for code in ("400", "401", "413", "429", "503"):
        assert post[code]["content"]["application/json"]["schema"]["$ref"].endswith("/Error"), code
    prompt = schema["paths"]["/api/v1/prompt/"]["get"]["responses"]
    assert prompt["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/Error")


def test_an_unexpected_error_is_a_500_in_the_same_shape(anonymous_api: Any, cpu_hardware: Any,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    def broken(hardware: Any) -> Any:
        raise RuntimeError("a bug in the leaderboard")

    monkeypatch.setattr("portal.api.views.boards.track", broken)
    r = anonymous_api.get(f"/api/v1/leaderboards/models/?hardware={cpu_hardware.slug}")
    error = error_of(r, 500)
    assert error["code"] == "server_error" and "a bug" not in error["message"]  # no internals
    assert any(rec.exc_info and "a bug in the leaderboard" in str(rec.exc_info[1])
               for rec in caplog.records)  # but the traceback is logged


def test_a_lost_database_inside_an_api_view_is_a_503_not_a_500(cpu_hardware: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The API's own handler must not swallow an outage into a generic 500 (the production fault
    test found it): it leaves it to handler500, which says which service is down and when to retry."""
    from django.db import OperationalError
    from django.test import Client

    def unreachable(hardware: Any) -> Any:
        raise OperationalError("connection to server at 127.0.0.1 failed: Connection refused")

    monkeypatch.setattr("portal.api.views.boards.track", unreachable)
    r = Client(raise_request_exception=False).get(
        f"/api/v1/leaderboards/models/?hardware={cpu_hardware.slug}")
    error = error_of(r, 503)
    assert error["code"] == "service_unavailable" and "database" in error["message"]
    assert r["Retry-After"] == "10"


def test_password_guessing_at_the_token_endpoint_is_throttled(anonymous_api: Any, settings: Any,
                                                               owner: Any) -> None:
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "login": "3/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    for _ in range(3):
        r = anonymous_api.post("/api/v1/auth/token/", {"username": "owner", "password": "guess"})
        assert error_of(r, 400)["code"] == "bad_credentials"
    # The fourth try is refused before the password is looked at, right or wrong.
    r = anonymous_api.post("/api/v1/auth/token/", {"username": "owner", "password": "pw"})
    assert error_of(r, 429)["code"] == "throttled"
    assert 0 < int(r["Retry-After"]) <= 60


def test_a_nul_byte_in_a_query_parameter_is_a_bad_parameter_not_a_server_error(anonymous_api: Any,
                                                                               cpu_hardware: Any) -> None:
    # Found by tests/portal/test_api_fuzz.py: PostgreSQL refused the NUL inside the model lookup.
    error = error_of(anonymous_api.get(f"/api/v1/compare/?hardware={cpu_hardware.slug}&models=a%00&models=b"), 400)
    assert error["code"] == "bad_parameter" and error["field"] == "models"
    error = error_of(anonymous_api.get("/api/v1/leaderboards/models/?hardware=x%00"), 400)
    assert error["code"] == "bad_parameter" and error["field"] == "hardware"


def test_a_path_that_matches_no_route_under_the_api_answers_json(anonymous_api: Any) -> None:
    # Found by tests/portal/test_api_fuzz.py: a newline in a slug matched no route, and the
    # answer was Django's HTML page.
    response = anonymous_api.get("/api/v1/problems/a%0Ab/")
    assert response.status_code == 404 and response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "not_found"


def test_the_prompt_without_hardware_is_for_hardware_that_runs_the_problem(
        anonymous_api: Any, all_reduce: Any, cpu_hardware: Any, gpu_hardware: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the busiest hardware with a live worker (CPU, 2 ranks) cannot run a problem of 4 ranks:
    # the prompt is for the hardware a submission without hardware would go to, as submit's is
    from portal.api import views
    from portal.submissions import services

    class OnlyCpu:
        def serves(self, queue: str) -> bool:
            return queue == cpu_hardware.queue

    monkeypatch.setattr(services, "liveness", lambda: OnlyCpu())
    monkeypatch.setattr(views, "preferred_hardware", lambda: cpu_hardware)
    all_reduce.world_sizes = [4]
    all_reduce.save()
    body = anonymous_api.get("/api/v1/prompt/?problem=all-reduce").json()
    assert body["hardware"] == gpu_hardware.slug and body["world_size"] == 4


def test_the_api_docs_group_endpoints_by_resource(anonymous_api: Any) -> None:
    # ReDoc and Swagger UI list the schema's tags: one tag "v1" for every endpoint, with
    # operations named v1_retrieve, v1_problems_list, ... told a visitor nothing
    schema = anonymous_api.get("/api/schema/?format=json").json()
    tags = {path: op["tags"] for path, ops in schema["paths"].items() for op in ops.values()
            if isinstance(op, dict) and "tags" in op}
    assert tags["/api/v1/problems/"] == ["problems"] and tags["/api/v1/submissions/"] == ["submissions"]
    assert not any(t == ["v1"] for path, t in tags.items() if path != "/api/v1/")
