"""Submit one file through a running portal's API and wait for its verdict (stdlib only).

Usage: python3 submit_and_wait.py URL USERNAME PASSWORD PROBLEM HARDWARE FILE [TIMEOUT_S]

Exit 0 when the evaluation finished with verdict `pass` inside the sandbox (`"sandbox": "on"`),
1 otherwise, saying what came back. build_and_run.sh uses it to check the images end to end.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def call(url: str, token: str = "", body: dict[str, Any] | None = None) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"{request.get_method()} {url}: HTTP {exc.code}: {exc.read().decode()[:500]}") from None


def wait(api: str, token: str, sub_id: int, timeout_s: float) -> dict[str, Any]:
    deadline, seen = time.monotonic() + timeout_s, ""
    while True:
        sub = call(f"{api}submissions/{sub_id}/", token)
        state = f"{sub['status']} {sub.get('progress') or ''}".strip()
        if state != seen:
            print(f"  {time.strftime('%H:%M:%S')} submission #{sub_id}: {state}", flush=True)
            seen = state
        if sub["status"] in ("finished", "failed"):
            return sub
        if time.monotonic() > deadline:
            raise SystemExit(f"submission #{sub_id} still {sub['status']} after {timeout_s:.0f} s")
        time.sleep(2)


def main(argv: list[str]) -> int:
    if len(argv) not in (6, 7):
        raise SystemExit(__doc__.strip().splitlines()[2])
    url, username, password, problem, hardware, path = argv[:6]
    timeout_s = float(argv[6]) if len(argv) == 7 else 600
    api = url.rstrip("/") + "/api/v1/"
    token = call(f"{api}auth/token/", body={"username": username, "password": password})["token"]
    sub = call(f"{api}submissions/", token, {
        "problem": problem, "hardware": hardware, "backend": "torch", "model": "human",
        "source": Path(path).read_text()})
    print(f"  submitted {path} as #{sub['id']} ({problem} on {hardware})", flush=True)
    started = time.monotonic()
    sub = wait(api, token, sub["id"], timeout_s)
    report = sub.get("report") or {}
    print(f"  verdict {sub.get('verdict')!r}, sandbox {report.get('sandbox')!r}, speedup "
          f"{sub.get('speedup')}, {time.monotonic() - started:.0f} s after submitting; "
          f"status reason: {sub.get('status_reason') or '-'}")
    ok = sub["status"] == "finished" and sub.get("verdict") == "pass" and report.get("sandbox") == "on"
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
