"""Headless Chromium: a submission's sweep draws its two charts (bus bandwidth and speedup against a
log-scale message size, titled with units) without console errors."""

from __future__ import annotations

from typing import Any

import pytest

from portal.submissions.lifecycle import record_report, record_sweep
from portal.submissions.services import create, get_model, resolve_target

from . import test_browser
from .test_sweeps import SWEEP, SWEPT_SOURCE

# The Chromium fixtures of the other browser tests, shared rather than copied.
browser, page = test_browser.browser, test_browser.page

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.slow]


@pytest.mark.django_db(transaction=True)
def test_the_submission_page_draws_the_sweep(live_server: Any, page: Any, owner: Any, all_reduce: Any,
                                             cpu_hardware: Any, real_report: dict[str, Any],
                                             no_dispatch: list[int]) -> None:
    sub = create(user=owner, target=resolve_target("all-reduce", cpu_hardware.slug), backend="torch",
                 model=get_model("sweeper"), text=SWEPT_SOURCE, origin="upload", sweep=True)
    sub.new_token()
    sub.save()
    version = all_reduce.current_version().version
    record_report(sub.pk, {**real_report, "problem": {**real_report["problem"], "version": version}})
    record_sweep(sub.pk, SWEEP)
    page.goto(f"{live_server.url}/submissions/{sub.pk}/")
    page.wait_for_selector("#chart-sweep-busbw .main-svg", timeout=15_000)
    page.wait_for_selector("#chart-sweep-speedup .main-svg", timeout=15_000)
    busbw = page.locator("#chart-sweep-busbw").inner_text()
    assert "Bus bandwidth per message size" in busbw and "bus bandwidth (GB/s, log scale)" in busbw
    assert "message size (bytes, log scale" in busbw and "16 KiB" in busbw  # ticks in binary units
    assert "Speedup per message size" in page.locator("#chart-sweep-speedup").inner_text()
    layout = page.evaluate("""() => {
        const b = document.getElementById('chart-sweep-busbw'), s = document.getElementById('chart-sweep-speedup');
        return {xtype: b.layout.xaxis.type, ytype: b.layout.yaxis.type, names: b.data.map((t) => t.name),
                stype: s.layout.xaxis.type, bars: s.data[0].error_y.array.length, points: s.data[0].x.length};
    }""")
    assert layout["xtype"] == layout["stype"] == layout["ytype"] == "log"
    assert layout["names"] == ["candidate", "reference (gloo)", "roofline", "failed at this size"]
    assert layout["bars"] == layout["points"] == 2
    assert page.locator("#sweep-table tbody tr").count() == 3
    # The whole report is one link away, not inside the page.
    assert page.locator("#sweep-json").count() == 1 and page.locator("pre#sweep-json").count() == 0
    linked = page.evaluate("() => fetch(document.getElementById('sweep-json').href).then((r) => r.json())")
    assert [p["message_bytes"] for p in linked["points"]] == [p["message_bytes"] for p in SWEEP["points"]]
    assert page.errors == []
