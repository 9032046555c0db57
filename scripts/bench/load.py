"""N concurrent API clients for T seconds against a running portal (gunicorn): reads of problems,
leaderboards, the comparison and a submission's status, and uploads at the throttled rate.

Every client has its own user and token (as bots would), so per-user throttles apply as in
production; uploads go out once per PKB_THROTTLE_SUBMIT period per writer. Prints, per
endpoint: requests, errors (anything but 2xx and the documented 429), 429s, p50/p95/p99.

    DATABASE_URL=... (the portal's database: users and tokens are created there) \
      .venv/bin/python scripts/bench/load.py --url http://127.0.0.1:8111 --clients 50 --seconds 60
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).parent)]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")

import provenance  # noqa: E402

SOURCE = (Path(__file__).resolve().parents[2] / "solutions/broken/cpu_correct.py").read_text()


def setup(clients: int, hardware: str) -> dict[str, object]:
    """Users with tokens, and what there is to read: problem slugs, models, submissions."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from portal.catalog.models import Problem
    from portal.submissions.models import Submission

    run = uuid.uuid4().hex[:6]
    users = [get_user_model().objects.create_user(f"load-{run}-{i}") for i in range(clients)]
    slugs = list(Problem.objects.active().values_list("slug", flat=True))
    subs = list(Submission.objects.filter(hardware__slug=hardware).order_by("?")
                .values_list("pk", flat=True)[:500])
    # order_by(): Submission's default ordering would make distinct() keep one row per date, and a
    # "comparison" of a model with itself is a 400 (too_few_models).
    models = list(Submission.objects.filter(hardware__slug=hardware, status="finished").order_by()
                  .values_list("model__name", flat=True).distinct()[:6])
    return {"tokens": [Token.objects.create(user=u).key for u in users], "slugs": slugs,
            "submissions": subs, "models": models}


class Client(threading.Thread):
    def __init__(self, base: str, token: str, plan: dict[str, object], hardware: str, until: float,
                 writer: bool, write_every_s: float, results: dict[str, list], lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        parts = urlsplit(base)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.headers = {"Authorization": f"Token {token}"}
        self.plan, self.hw, self.until, self.writer = plan, hardware, until, writer
        self.write_every_s, self.results, self.lock = write_every_s, results, lock
        self.rng = random.Random()
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)

    def request(self, name: str, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> None:
        started = time.perf_counter()
        try:
            self.conn.request(method, path, body=body, headers={**self.headers, **(headers or {})})
            response = self.conn.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException) as exc:
            status = f"{type(exc).__name__}"
            self.conn.close()
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        ms = (time.perf_counter() - started) * 1000
        with self.lock:
            self.results[name].append((status, ms))

    def read_once(self) -> None:
        slugs, subs, models = self.plan["slugs"], self.plan["submissions"], self.plan["models"]
        slug = self.rng.choice(slugs)
        choice = self.rng.random()
        if choice < 0.2:
            self.request("problems list", "GET", f"/api/v1/problems/?hardware={self.hw}")
        elif choice < 0.35:
            self.request("problem detail", "GET", f"/api/v1/problems/{slug}/")
        elif choice < 0.55:
            self.request("model leaderboard", "GET", f"/api/v1/leaderboards/models/?hardware={self.hw}")
        elif choice < 0.75:
            self.request("problem leaderboard", "GET",
                         f"/api/v1/leaderboards/problems/{slug}/?hardware={self.hw}")
        elif choice < 0.85 and len(models) >= 2:
            pair = ",".join(self.rng.sample(models, 2))
            self.request("comparison", "GET", f"/api/v1/compare/?hardware={self.hw}&models={pair}")
        elif subs:
            self.request("submission status", "GET", f"/api/v1/submissions/{self.rng.choice(subs)}/")

    def write_once(self) -> None:
        body = json.dumps({"problem": "all-reduce", "hardware": self.hw, "backend": "torch",
                           "model": "load-test", "source": SOURCE}).encode()
        self.request("upload", "POST", "/api/v1/submissions/", body, {"Content-Type": "application/json"})

    def run(self) -> None:
        next_write = time.monotonic() + self.rng.uniform(0, self.write_every_s)
        while time.monotonic() < self.until:
            if self.writer and time.monotonic() >= next_write:
                self.write_once()
                next_write += self.write_every_s
            else:
                self.read_once()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(q * len(ordered)) - 1)] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--writers", type=int, default=5, help="clients that also upload")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--hardware", default="h200-x4-nvlink")
    parser.add_argument("--submit-rate", default=os.environ.get("PKB_THROTTLE_SUBMIT", "20/min"),
                        help="the portal's PKB_THROTTLE_SUBMIT: writers stay at it")
    args = parser.parse_args()
    count, period = args.submit_rate.split("/")
    write_every_s = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600}[period] / int(count)

    header = provenance.lines()
    plan = setup(args.clients, args.hardware)
    results: dict[str, list] = defaultdict(list)
    lock = threading.Lock()
    until = time.monotonic() + args.seconds
    clients = [Client(args.url, token, plan, args.hardware, until, i < args.writers, write_every_s * 1.05,
                      results, lock) for i, token in enumerate(plan["tokens"])]  # type: ignore[arg-type]
    started = time.monotonic()
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    wall = time.monotonic() - started
    print("\n".join(header))
    print(f"load: {args.clients} clients ({args.writers} also upload, one per {write_every_s * 1.05:.1f} s) "
          f"for {args.seconds:.0f} s against {args.url}; load average at the end "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| endpoint | requests | errors | 429 | p50 ms | p95 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    total = errors = 0
    for name in sorted(results):
        rows = results[name]
        ok = [ms for status, ms in rows if isinstance(status, int) and 200 <= status < 300]
        limited = sum(1 for status, _ in rows if status == 429)
        bad = [status for status, _ in rows if not (isinstance(status, int) and (200 <= status < 300 or status == 429))]
        total, errors = total + len(rows), errors + len(bad)
        print(f"| {name} | {len(rows)} | {len(bad)} | {limited} | {statistics.median(ok) if ok else float('nan'):.0f} "
              f"| {pct(ok, 0.95):.0f} | {pct(ok, 0.99):.0f} |")
        if bad:
            print(f"|   errors of {name}: {sorted(set(map(str, bad)))} | | | | | | |")
    print(f"\n{total} requests in {wall:.0f} s ({total / wall:.0f}/s), {errors} errors")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
