from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from portal.catalog.models import Hardware
from portal.catalog.reference_timings import import_timings
from portal.catalog.services import load_catalog
from portal.leaderboards import cache as board_cache
from portal.runs.board_seed import seed_board
from portal.submissions.importing import enqueue_baselines, import_results


class Command(BaseCommand):
    help = ("Load problems and hardware, import committed reports from docs/results, "
            "measured reference timings from docs/measurements and the model board's runs "
            "from docs/measurements/board, and optionally queue real "
            "reference runs on a hardware profile. Idempotent.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--baselines", metavar="HARDWARE", default="",
                            help="queue the reference of every problem lacking one on HARDWARE")
        parser.add_argument("--pkb-dirs", metavar="DIR", default="",
                            help="ParallelKernelBench directories (default .pkb-dirs where it "
                                 "exists): board runs keep the exact sources evaluated")

    def handle(self, *args: Any, **options: Any) -> None:
        loaded = load_catalog(settings.PKB_PROBLEMS_PACKAGE, settings.PKB_HARDWARE_DIR)
        self.stdout.write(f"problems: {len(loaded.created)} new, {len(loaded.new_versions)} new "
                          f"versions, {len(loaded.unchanged)} unchanged, {len(loaded.retired)} "
                          f"retired; hardware: {', '.join(loaded.hardware)}")
        imported = import_results(settings.PKB_RESULTS_DIR, settings.BASE_DIR)
        self.stdout.write(f"reports: {len(imported.imported)} imported, "
                          f"{len(imported.skipped)} already there")
        timings = import_timings(settings.PKB_MEASUREMENTS_DIR)
        self.stdout.write(f"reference timings: {len(timings.created)} new, {len(timings.updated)} "
                          f"replaced, {len(timings.unchanged)} unchanged, {len(timings.not_ok)} "
                          "without a baseline (failed, untimed, or timed on an earlier problem version)")
        pkb_dirs = Path(options["pkb_dirs"]) if options["pkb_dirs"] else settings.BASE_DIR / ".pkb-dirs"
        board = seed_board(settings.PKB_MEASUREMENTS_DIR / "board", settings.BASE_DIR,
                           pkb_dirs if pkb_dirs.is_dir() else None)
        self.stdout.write(f"board runs (docs/measurements/board): {len(board.runs_created)} new "
                          f"runs, {len(board.added)} samples added, {len(board.unchanged)} already there")
        board_cache.invalidate()  # versions and retirements change by bulk updates (no signals)
        for error in loaded.errors + imported.errors + timings.errors + board.errors:
            self.stderr.write(f"error: {error}")
        if options["baselines"]:
            hardware = Hardware.objects.get(slug=options["baselines"])
            queued = enqueue_baselines(hardware)
            self.stdout.write(f"baselines queued on {hardware.slug}: {len(queued)}")
