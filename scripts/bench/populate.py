"""Fill a benchmark database with N finished submissions (default 100,000) for the leaderboard
and load benchmarks. Never point it at a real portal's database: the rows are synthetic.

Each row is a copy of a real evaluator report (tests/portal/data/report_all_reduce_pass.json)
with its verdict, speedup, interval and times drawn at random, so that the report column weighs
what real ones weigh. Models, problems and hardware are spread as on a busy site: 24 models,
every active problem, 80% of rows on the 4 x H200 profile.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/pkb_bench \
      .venv/bin/python scripts/bench/populate.py --submissions 100000
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=100_000)
    parser.add_argument("--models", type=int, default=24)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from portal.catalog.models import Hardware, Problem
    from portal.leaderboards import cache as board_cache
    from portal.submissions.models import AIModel, Submission

    call_command("migrate", verbosity=0, interactive=False)
    call_command("load_catalog")
    rng = random.Random(args.seed)
    template = json.loads((REPO / "tests/portal/data/report_all_reduce_pass.json").read_text())
    user, _ = get_user_model().objects.get_or_create(username="bench")
    models = [AIModel.objects.get_or_create(name=f"bench-model-{i:02d}", defaults={"provider": "bench"})[0]
              for i in range(args.models)]
    hardware = list(Hardware.objects.active())
    weights = [8 if h.slug == "h200-x4-nvlink" else 1 for h in hardware]
    problems = [(p, p.current_version()) for p in Problem.objects.active()]
    now = timezone.now()
    started = time.monotonic()
    batch: list[Submission] = []
    made = 0
    attempt: dict[tuple[int, int, int], int] = {}
    while made < args.submissions:
        hw = rng.choices(hardware, weights)[0]
        problem, version = rng.choice(problems)
        world_size = hw.ranked_world_size(problem.world_sizes)
        if version is None or world_size is None:
            continue
        model = rng.choice(models)
        passed = rng.random() < 0.6
        speedup = rng.lognormvariate(0.0, 0.5)
        low, high = speedup * rng.uniform(0.9, 0.99), speedup * rng.uniform(1.01, 1.1)
        ref_ms = rng.uniform(0.05, 5.0)
        report = copy.deepcopy(template)
        report["schema_version"] = "1.3"
        report["verdict"] = "pass" if passed else "fail"
        report["failure"] = None if passed else {"failure_class": rng.choice(
            ["value_mismatch", "deadlock", "compile_error", "runtime_error"]), "message": "synthetic"}
        report["timing"].update({"speedup": speedup, "interval": {
            "low": low, "high": high, "level": 0.95, "method": "bootstrap percentile interval"}})
        key = (model.pk, version.pk, hw.pk)
        attempt[key] = attempt.get(key, 0) + 1
        when = now - timedelta(minutes=rng.randint(1, 60 * 24 * 90))
        batch.append(Submission(
            user=user, model=model, attempt=attempt[key], problem_version=version, hardware=hw,
            backend="torch", world_size=world_size, size=hw.size, source="# synthetic\n",
            source_sha256="0" * 64, origin="api", status="finished", created_at=when,
            started_at=when, finished_at=when + timedelta(seconds=40), report=report,
            verdict=report["verdict"], failure_class="" if passed else report["failure"]["failure_class"],
            speedup=speedup if passed else None, speedup_low=low if passed else None,
            speedup_high=high if passed else None, candidate_ms=ref_ms / speedup,
            reference_ms=ref_ms, roofline_fraction=rng.uniform(0.05, 0.9) if hw.kind == "gpu" else None))
        made += 1
        if len(batch) == 2000:
            Submission.objects.bulk_create(batch)
            batch.clear()
            print(f"{made:,} rows ({time.monotonic() - started:.0f} s)", flush=True)
    Submission.objects.bulk_create(batch)
    board_cache.invalidate()  # bulk_create sends no signals
    print(f"{Submission.objects.count():,} submissions in {settings.DATABASES['default']['NAME']} "
          f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
