from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from portal.catalog.services import load_catalog
from portal.leaderboards import cache as board_cache


class Command(BaseCommand):
    help = "Load problems (a changed module makes a new version) and hardware profiles. Idempotent."

    def handle(self, *args: Any, **options: Any) -> None:
        result = load_catalog(settings.PKB_PROBLEMS_PACKAGE, settings.PKB_HARDWARE_DIR)
        board_cache.invalidate()  # versions and retirements change by bulk updates (no signals)
        self.stdout.write(
            f"problems: {len(result.created)} new, {len(result.new_versions)} new versions, "
            f"{len(result.unchanged)} unchanged, {len(result.retired)} retired; "
            f"hardware: {', '.join(result.hardware)}")
        for error in result.errors:
            self.stderr.write(f"error: {error}")
