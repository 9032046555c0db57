"""Screenshots of the portal's main pages for docs/screenshots/, taken from a running site.

    .venv/bin/python manage.py pkb_up --port 8114 &        # seeded data and a local CPU worker
    .venv/bin/python scripts/screenshots.py --base http://127.0.0.1:8114 --out docs/screenshots

It logs in as the local demo user, uploads two real candidates through the API (a correct one
and one that is wrong on rank 1: solutions/broken/) so that a passed and a failed submission
exist, waits for the local worker to judge them, then drives headless Chromium (Playwright with
the system's /usr/bin/chromium, never a downloaded browser) at 1400 px and at a 390 px phone.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("PKB_CHROMIUM", "/usr/bin/chromium")
DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}
# The long pages are cut at this height (px): enough to show the top of the problem list.
CUT = {"home": 1500, "home-phone": 2600, "api-docs": 900, "compare": 2200, "compare-phone": 3000}


def api(base: str, path: str, token: str = "", data: dict[str, Any] | None = None) -> Any:
    body = json.dumps(data).encode() if data is not None else None
    request = urllib.request.Request(base + path, data=body, headers={
        "Content-Type": "application/json", "Accept": "application/json",
        **({"Authorization": f"Token {token}"} if token else {})})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def judged(base: str, token: str, source: Path) -> int:
    """Upload ``source`` for all-reduce (hardware left to the portal) and wait for its verdict."""
    sub = api(base, "/api/v1/submissions/", token, {
        "problem": "all-reduce", "model": "screenshot-demo", "source": source.read_text()})
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        state = api(base, f"/api/v1/submissions/{sub['id']}/", token)
        if state["status"] in ("finished", "failed"):
            return int(sub["id"])
        time.sleep(2)
    raise SystemExit(f"submission {sub['id']} was not judged within 300 s: is the worker running?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--user", default="demo")
    parser.add_argument("--password", default="demo-pkb-local")
    parser.add_argument("--gpu", default="h200-x4-nvlink", help="hardware shown on GPU pages")
    parser.add_argument("--board", default="h100-x2-nvlink",
                        help="hardware whose model leaderboard is shown (the one the board's models are on)")
    args = parser.parse_args()
    base = args.base.rstrip("/")
    args.out.mkdir(parents=True, exist_ok=True)

    token = api(base, "/api/v1/auth/token/", data={"username": args.user,
                                                   "password": args.password})["token"]
    passed = judged(base, token, ROOT / "solutions" / "broken" / "cpu_correct.py")
    failed = judged(base, token, ROOT / "solutions" / "broken" / "cpu_wrong_on_one_rank.py")
    cpu = api(base, f"/api/v1/submissions/{passed}/", token)["hardware"]
    compare = urllib.parse.urlencode([("hardware", cpu), ("models", "screenshot-demo"),
                                      ("models", "reference")])

    desktop_pages = [
        ("home", "/"),
        ("problem", f"/problems/all-reduce/?hardware={args.gpu}"),
        ("hardware-list", "/hardware/"),
        ("hardware", f"/hardware/{args.gpu}/"),
        ("leaderboard", f"/leaderboard/?hardware={args.board}"),
        ("compare", f"/leaderboard/compare/?{compare}"),
        ("submission-passed", f"/submissions/{passed}/"),
        ("submission-failed", f"/submissions/{failed}/"),
        ("upload", "/submissions/upload/"),
        ("api-docs", "/api/redoc/"),
    ]
    phone_pages = [("home-phone", "/"), ("submission-failed-phone", f"/submissions/{failed}/"),
                   ("submission-passed-phone", f"/submissions/{passed}/"),
                   ("leaderboard-phone", f"/leaderboard/?hardware={args.board}"),
                   ("compare-phone", f"/leaderboard/compare/?{compare}")]

    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        for viewport, pages in ((DESKTOP, desktop_pages), (PHONE, phone_pages)):
            context = browser.new_context(viewport=viewport, device_scale_factor=1)
            page = context.new_page()
            page.goto(f"{base}/accounts/login/")
            page.fill("#id_username", args.user)
            page.fill("#id_password", args.password)
            page.click("#login-form button[type=submit]")
            page.wait_for_load_state("networkidle")
            for name, path in pages:
                page.goto(base + path)
                page.wait_for_load_state("networkidle")
                page.wait_for_timeout(800)  # plotly draws after load
                cut = {"clip": {"x": 0, "y": 0, "width": viewport["width"], "height": CUT[name]}} \
                    if name in CUT else {}
                page.screenshot(path=str(args.out / f"{name}.png"), full_page=True, **cut)
                print(f"{name}.png  {path}")
            if viewport is PHONE:
                page.goto(base + "/")
                page.click("#nav-button")
                page.screenshot(path=str(args.out / "home-phone-menu.png"))
                print("home-phone-menu.png  / (menu open)")
            context.close()
        browser.close()


if __name__ == "__main__":
    main()
