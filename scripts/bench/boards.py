"""Leaderboards with many submissions: each board's time and query count, cold and warm.

Cold: the cache was just invalidated (a result landed), so the board is computed from the
database; warm: served from the cache until the next result. In-process through Django's test
client (no network), with the production settings and cache (Redis).

    DJANGO_SETTINGS_MODULE=portal.settings.production PKB_HTTPS=0 PKB_SECRET_KEY=... \
      DATABASE_URL=postgres://postgres@127.0.0.1:5432/pkb_bench PKB_BROKER_URL=redis://127.0.0.1:6379/12 \
      PKB_STATIC_ROOT=/tmp/pkb-static .venv/bin/python scripts/bench/boards.py --repeat 40
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).parent)]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")
os.environ.setdefault("PKB_THROTTLE_ANON", "1000000/min")  # one client, many requests: not what is measured

import provenance  # noqa: E402


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hardware", default="h200-x4-nvlink")
    parser.add_argument("--problem", default="all-reduce")
    parser.add_argument("--repeat", type=int, default=40, help="warm requests per board")
    parser.add_argument("--cold", type=int, default=3, help="cold requests per board")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from portal.leaderboards import cache as board_cache
    from portal.submissions.models import Submission

    models = list(Submission.objects.filter(model__name__startswith="bench-model-")
                  .values_list("model__name", flat=True).distinct().order_by("model__name")[:2])
    if len(models) < 2:
        models = ["reference", "human"]
    hw, slug = args.hardware, args.problem
    boards = {
        "API model leaderboard": f"/api/v1/leaderboards/models/?hardware={hw}",
        "API problem leaderboard": f"/api/v1/leaderboards/problems/{slug}/?hardware={hw}",
        "API comparison": f"/api/v1/compare/?hardware={hw}&models={','.join(models)}",
        "page model leaderboard": f"/leaderboard/?hardware={hw}",
        "page problem (with board)": f"/problems/{slug}/?hardware={hw}",
        "page comparison": f"/leaderboard/compare/?hardware={hw}&models={models[0]}&models={models[1]}",
    }
    client = Client(HTTP_HOST="127.0.0.1")
    total = Submission.objects.count()
    print("\n".join(provenance.lines()))
    print(f"submissions in the database: {total:,}; finished on {hw}: "
          f"{Submission.objects.filter(hardware__slug=hw, status='finished').count():,}\n")
    print("| board | cold ms (median of %d) | cold queries | warm p50 ms | warm p95 ms | warm queries |" % args.cold)
    print("|---|---:|---:|---:|---:|---:|")
    for name, url in boards.items():
        cold, warm = [], []
        for _ in range(args.cold):
            board_cache.invalidate()
            with CaptureQueriesContext(connection) as cold_queries:
                started = time.perf_counter()
                response = client.get(url)
                cold.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        for _ in range(args.repeat):
            with CaptureQueriesContext(connection) as warm_queries:
                started = time.perf_counter()
                response = client.get(url)
                warm.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        print(f"| {name} | {statistics.median(cold):.0f} | {len(cold_queries)} | "
              f"{statistics.median(warm):.1f} | {p95(warm):.1f} | {len(warm_queries)} |")


if __name__ == "__main__":
    main()
