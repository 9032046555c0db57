from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from portal.catalog.models import Hardware
from portal.catalog.reference_timings import import_timings
from portal.catalog.services import load_catalog
from portal.leaderboards import cache as board_cache
from portal.submissions.importing import enqueue_baselines, import_results


class Command(BaseCommand):
    help = ("Load problems and hardware, import committed reports from docs/results and "
            "measured reference timings from docs/measurements, and optionally queue real "
            "reference runs on a hardware profile. Idempotent.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--baselines", metavar="HARDWARE", default="",
                            help="queue the reference of every problem lacking one on HARDWARE")

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
        board_cache.invalidate()  # versions and retirements change by bulk updates (no signals)
        for error in loaded.errors + imported.errors + timings.errors:
            self.stderr.write(f"error: {error}")
        if options["baselines"]:
            hardware = Hardware.objects.get(slug=options["baselines"])
            queued = enqueue_baselines(hardware)
            self.stdout.write(f"baselines queued on {hardware.slug}: {len(queued)}")
