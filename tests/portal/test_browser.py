"""Headless Chromium: the main pages load without console errors; an upload finishes with charts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from portal.submissions.importing import import_results

from .conftest import DATA, VALID_SOURCE, with_interval

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.slow]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop
CHROMIUM = os.environ.get("PKB_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    p = context.new_page()
    p.errors = []  # type: ignore[attr-defined]
    p.on("console", lambda m: m.type == "error" and p.errors.append(m.text))
    p.on("pageerror", lambda e: p.errors.append(str(e)))
    yield p
    context.close()


@pytest.fixture
def seeded(all_reduce: Any, cpu_hardware: Any, tmp_path: Path) -> Any:
    """The real report in tests/portal/data, imported as the reference model's result."""
    report = json.loads((DATA / "report_all_reduce_pass.json").read_text())
    report["hardware_profile"] = cpu_hardware.slug
    (tmp_path / "r.json").write_text(json.dumps({"model": "reference", "reports": [report]}))
    assert import_results(tmp_path, tmp_path).imported
    return cpu_hardware


@pytest.mark.django_db(transaction=True)
def test_main_pages_load_without_console_errors(live_server: Any, page: Any, seeded: Any) -> None:
    for path, marker in [
        ("/", "#problems"), ("/problems/all-reduce/", "#leaderboard"), ("/hardware/", "#hardware"),
        (f"/hardware/{seeded.slug}/", "h1"), (f"/leaderboard/?hardware={seeded.slug}", "table.data"),
        (f"/leaderboard/compare/?hardware={seeded.slug}", "#chart-fastp .main-svg"),
        ("/api/docs/", "#swagger-ui"),
    ]:
        response = page.goto(live_server.url + path)
        assert response.status == 200, path
        page.wait_for_selector(marker, timeout=15_000)
    page.goto(live_server.url + "/?category=collective&q=reduce")
    assert page.locator("#problems tbody tr").count() >= 1
    assert page.errors == []


def _upload_through_the_form(page: Any, url: str, seeded: Any, kernel: Path) -> None:
    page.goto(f"{url}/submissions/upload/?problem=all-reduce&hardware={seeded.slug}")
    page.fill("#id_username", "owner")
    page.fill("#id_password", "owner-pass-123")
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#upload-form")
    page.fill("#id_model", "browser-model")
    page.set_input_files("#id_source", str(kernel))
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/submissions/*/")


def _finished_report_and_charts(page: Any, url: str, seeded: Any) -> None:
    page.wait_for_selector("#verdict", timeout=180_000)  # the page reloads itself when done
    assert page.locator("#status").inner_text() == "finished"
    assert page.locator("#verdict").inner_text() == "pass"
    page.wait_for_selector("#chart-ranks .main-svg", timeout=15_000)
    assert page.locator("#trials tbody tr").count() >= 2
    page.goto(f"{url}/leaderboard/compare/?hardware={seeded.slug}&models=browser-model&models=reference")
    for chart in ("fastp", "scatter", "categories", "failures"):
        page.wait_for_selector(f"#chart-{chart} .main-svg", timeout=15_000)
    csv = page.request.get(f"{url}/leaderboard/compare/?hardware={seeded.slug}"
                           "&models=browser-model&models=reference&export=csv&table=per_problem")
    assert csv.ok and "browser-model" in csv.text()
    assert page.errors == []


@pytest.mark.django_db(transaction=True)
def test_an_upload_follows_its_job_to_the_finished_report_and_charts(
        live_server: Any, page: Any, seeded: Any, owner: Any, all_reduce: Any, anonymous_api: Any,
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """make test's upload in the browser: the worker's part played here, through the worker API
    with the job's own secret (a status, then the real report in tests/portal/data). The same
    upload judged by the real Celery worker is the test below, make test-long's; that worker
    evaluates a submission end to end in make test (tests/portal/test_worker_end_to_end.py)."""
    from portal.submissions.models import Submission

    from .test_worker_callbacks import post

    jobs: list[tuple[int, str]] = []
    monkeypatch.setattr("portal.submissions.services.dispatch", lambda pk, token: jobs.append((pk, token)))
    kernel = tmp_path / "my_kernel.py"
    kernel.write_text(VALID_SOURCE)
    _upload_through_the_form(page, live_server.url, seeded, kernel)
    assert len(jobs) == 1
    sub, token = Submission.objects.get(pk=jobs[0][0]), jobs[0][1]
    assert page.url.rstrip("/").endswith(f"/submissions/{sub.pk}") and sub.source == VALID_SOURCE
    report = json.loads((DATA / "report_all_reduce_pass.json").read_text())
    report["problem"] = {**report["problem"], "version": all_reduce.current_version().version}
    assert post(anonymous_api, sub, "status", token, {"status": "running", "worker": "w1"}).status_code == 200
    assert post(anonymous_api, sub, "report", token, {"report": report, "worker": "w1"}).status_code == 200
    _finished_report_and_charts(page, live_server.url, seeded)


# make test-long's: the upload above judged by the real Celery worker (a minute of make test's
# one worker on the 2-core host, behind its other evaluations).
@pytest.mark.long
@pytest.mark.django_db(transaction=True)
def test_an_upload_shows_the_finished_report_and_charts(
        live_server: Any, page: Any, seeded: Any, owner: Any, celery_worker_process: Any,
        tmp_path: Path) -> None:
    kernel = tmp_path / "my_kernel.py"
    kernel.write_text(VALID_SOURCE)
    _upload_through_the_form(page, live_server.url, seeded, kernel)
    _finished_report_and_charts(page, live_server.url, seeded)


@pytest.mark.django_db(transaction=True)
def test_a_result_with_an_interval_draws_its_rounds_and_error_bars(
        live_server: Any, page: Any, seeded: Any, owner: Any, all_reduce: Any) -> None:
    from django.utils import timezone

    from portal.submissions.lifecycle import apply_report
    from portal.submissions.models import AIModel, Submission

    version = all_reduce.current_version()
    report = with_interval(json.loads((DATA / "report_all_reduce_pass.json").read_text()), moved=True)
    report["problem"] = {**report["problem"], "version": version.version}
    sub = Submission(user=owner, model=AIModel.objects.create(name="interval-model"), attempt=1,
                     problem_version=version, hardware=seeded, backend="cuda", world_size=2,
                     size="small", source="x", source_sha256="0" * 64, status="finished",
                     finished_at=timezone.now())
    apply_report(sub, report)
    sub.save()
    page.goto(f"{live_server.url}/submissions/{sub.pk}/")
    page.wait_for_selector("#chart-rounds .main-svg", timeout=15_000)
    assert "Speedup in each alternating round" in page.locator("#chart-rounds").inner_text()
    assert page.locator("#clocks-moved").is_visible()
    assert "(1.17–1.21)" in page.locator("#speedup").inner_text()
    page.goto(f"{live_server.url}/leaderboard/compare/?hardware={seeded.slug}"
              "&models=interval-model&models=reference")
    page.wait_for_selector("#chart-scatter .main-svg", timeout=15_000)
    assert page.errors == []
