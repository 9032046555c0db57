"""Headless Chromium at 1400 px and at a 390 px phone: the home page, a failed submission's
colours, chart titles and units, the folded nav, tables that scroll inside their box, and API
docs that load nothing from the internet."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest
from django.utils import timezone

from portal.submissions.importing import import_results

from .conftest import DATA
from . import test_browser as _chromium

browser = _chromium.browser  # the module-scoped headless Chromium fixture, shared

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.slow,
              pytest.mark.django_db(transaction=True)]
DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}
H200 = Path(__file__).resolve().parents[2] / "hardware" / "h200-x4-nvlink.json"


def open_page(browser: Any, viewport: dict[str, int], live_server: Any) -> Any:
    """A page that records console errors and every request that leaves the live server."""
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.errors = []  # type: ignore[attr-defined]
    page.outside = []  # type: ignore[attr-defined]
    page.on("console", lambda m: m.type == "error" and page.errors.append(m.text))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("request", lambda r: None if r.url.startswith((live_server.url, "data:", "blob:"))
            else page.outside.append(r.url))
    return page


@pytest.fixture
def desktop(browser: Any, live_server: Any) -> Iterator[Any]:
    page = open_page(browser, DESKTOP, live_server)
    yield page
    page.context.close()


@pytest.fixture
def phone(browser: Any, live_server: Any) -> Iterator[Any]:
    page = open_page(browser, PHONE, live_server)
    yield page
    page.context.close()


@pytest.fixture
def site(all_reduce: Any, cpu_hardware: Any, owner: Any, tmp_path: Path) -> dict[str, Any]:
    """A CPU result imported from the real report, a failed upload beside it, and the real
    4 x H200 profile (peer-bandwidth heatmap and NCCL curves)."""
    from portal.catalog.models import Hardware
    from portal.submissions.lifecycle import apply_report
    from portal.submissions.models import AIModel, Submission

    cpu_hardware.name = "AMD EPYC 7B13 (2 gloo ranks on a shared host)"  # long: a wide <select>
    cpu_hardware.save()
    version = all_reduce.current_version()
    report = json.loads((DATA / "report_all_reduce_pass.json").read_text())
    report["hardware_profile"] = cpu_hardware.slug
    report["problem"]["version"] = version.version
    (tmp_path / "r.json").write_text(json.dumps({"model": "gpt-test", "reports": [report]}))
    assert import_results(tmp_path, tmp_path).imported
    failing = {**report, "verdict": "fail",
               "failure": {"failure_class": "wrong_output", "rank": 1, "trial": 0, "output": 0,
                           "message": "rank 1 output 0 differs from the reference: max abs error "
                                      "3.2 > atol 0.01"}}
    failed = Submission(user=owner, model=AIModel.objects.create(name="wrong-model"), attempt=1,
                        problem_version=version, hardware=cpu_hardware, backend="torch",
                        world_size=2, size="small", source="x", source_sha256="0" * 64,
                        status="finished", finished_at=timezone.now(), origin="upload")
    apply_report(failed, failing)
    failed.save()
    profile = json.loads(H200.read_text())
    h200 = Hardware.objects.create(slug=profile["id"], name="4x NVIDIA H200", kind="gpu", gpus=4,
                                   world_size=4, profile=profile)
    return {"cpu": cpu_hardware, "failed": failed, "h200": h200}


def no_page_overflow(page: Any) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"the page is {width} px wide"


def chart_titles(page: Any, selector: str) -> dict[str, str]:
    """The plotly title and axis titles drawn in one chart."""
    page.wait_for_selector(f"{selector} .main-svg", timeout=15_000)
    return page.evaluate("""(sel) => {
        const el = document.querySelector(sel);
        const text = (q) => { const t = el.querySelector(q); return t ? t.textContent.trim() : ""; };
        return {title: text(".gtitle"), x: text(".xtitle"), y: text(".ytitle"), bar: text(".cbtitle")};
    }""", selector)


def test_the_home_page_at_1400_px(live_server: Any, desktop: Any, site: dict[str, Any]) -> None:
    desktop.goto(live_server.url + "/")
    assert desktop.locator("#home h1").is_visible()
    for section in ("#scoring", "#take-part", "#best", "#problems"):
        assert desktop.locator(section).is_visible(), section
    card = desktop.locator(f'.best-results .card[data-hardware="{site["cpu"].slug}"]')
    assert "gpt-test" in card.inner_text() and card.locator(".smoke").is_visible()
    assert desktop.locator("#nav-button").is_hidden() and desktop.locator("#site-nav").is_visible()
    no_page_overflow(desktop)
    csv = desktop.request.get(live_server.url + "/?export=csv")
    assert csv.ok and csv.headers["content-type"].startswith("text/csv") and "all-reduce" in csv.text()
    assert desktop.errors == [] and desktop.outside == []


def test_a_failed_submission_is_red_not_green(live_server: Any, desktop: Any,
                                              site: dict[str, Any]) -> None:
    desktop.goto(f"{live_server.url}/submissions/{site['failed'].pk}/")
    banner = desktop.locator("#status-box")
    assert desktop.locator("#verdict").inner_text() == "fail"
    red, green, _ = _rgb(banner.evaluate("e => getComputedStyle(e).backgroundColor"))
    assert red > green, "a failed verdict sits on a green banner"
    red, green, _ = _rgb(desktop.locator("#verdict").evaluate("e => getComputedStyle(e).color"))
    assert red > green
    assert desktop.locator("#failure").is_visible()
    stamp = desktop.locator("time").first
    assert re.match(r"\d{4}-\d\d-\d\dT", stamp.get_attribute("title") or "")
    assert desktop.errors == []


def _rgb(css: str) -> tuple[int, ...]:
    return tuple(int(v) for v in re.findall(r"\d+", css)[:3])


def test_every_chart_has_a_title_and_axis_units(live_server: Any, desktop: Any,
                                                site: dict[str, Any]) -> None:
    desktop.goto(f"{live_server.url}/hardware/{site['h200'].slug}/")
    heat = chart_titles(desktop, "#chart-heatmap")
    assert "GB/s" in heat["title"] and "from 0" in heat["title"] and heat["x"] and heat["y"]
    assert heat["bar"] == "GB/s"
    drawn = desktop.evaluate("(() => { const d = document.getElementById('chart-heatmap')._fullData[0];"
                             " return [d.zmin, d.zmax, d.zauto]; })()")
    assert drawn[0] == 0 and drawn[1] > 300 and drawn[2] is False  # the scale as drawn starts at 0
    curves = chart_titles(desktop, "#chart-curves")
    assert curves["title"] and "(bytes" in curves["x"] and "(GB/s)" in curves["y"]
    assert "Link bandwidth:" in desktop.locator("#roofline-notes").inner_text()
    desktop.goto(f"{live_server.url}/leaderboard/compare/?hardware={site['cpu'].slug}"
                 "&models=gpt-test&models=wrong-model")
    for chart in ("fastp", "scatter", "categories", "failures"):
        found = chart_titles(desktop, f"#chart-{chart}")
        assert found["title"] and found["y"] and "(" in found["y"], (chart, found)
    desktop.goto(f"{live_server.url}/leaderboard/?hardware={site['cpu'].slug}")
    found = chart_titles(desktop, "#chart-fastp")
    assert found["title"] and "(x)" in found["x"] and "(%)" in found["y"]
    imported = site["failed"].pk - 1
    desktop.goto(f"{live_server.url}/submissions/{imported}/")
    found = chart_titles(desktop, "#chart-ranks")
    assert found["title"] and "(ms)" in found["y"]
    assert desktop.errors == []


def test_the_phone_layout_at_390_px(live_server: Any, phone: Any, site: dict[str, Any]) -> None:
    phone.goto(live_server.url + "/")
    assert phone.locator("#site-nav").is_hidden() and phone.locator("#nav-button").is_visible()
    phone.click("#nav-button")
    assert phone.locator("#site-nav").is_visible()
    assert phone.locator("#site-nav a", has_text="Hardware").is_visible()
    no_page_overflow(phone)
    box = phone.locator("#problems").locator("xpath=..")
    assert box.evaluate("e => getComputedStyle(e).overflowX") == "auto"
    assert box.evaluate("e => e.scrollWidth > e.clientWidth"), "the problem table fits a phone?"
    for path in (f"/leaderboard/?hardware={site['cpu'].slug}", f"/hardware/{site['h200'].slug}/",
                 f"/submissions/{site['failed'].pk}/", f"/problems/all-reduce/?hardware={site['cpu'].slug}",
                 "/hardware/"):
        phone.goto(live_server.url + path)
        no_page_overflow(phone)
    phone.goto(f"{live_server.url}/leaderboard/?hardware={site['cpu'].slug}")
    assert phone.locator(".table-wrap.overflows + .scroll-hint").first.is_visible()
    assert phone.errors == []


def test_the_api_docs_load_nothing_from_the_internet(live_server: Any, desktop: Any) -> None:
    for path, ready in (("/api/docs/", "#swagger-ui .info"), ("/api/redoc/", "#redoc-container h1")):
        desktop.goto(live_server.url + path)
        desktop.wait_for_selector(ready, timeout=20_000)
        desktop.wait_for_load_state("networkidle")
    assert desktop.outside == []
