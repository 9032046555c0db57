from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.runs.board_plan import PLAN_NAME, make_plan


class Command(BaseCommand):
    help = ("Write docs/measurements/board/plan.json: every file of the ParallelKernelBench "
            "directories that the import accepts, so seeded runs say how much of their directory "
            "the board has evaluated.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dirs", default=str(settings.BASE_DIR / ".pkb-dirs"),
                            help="holds the solutions_* directories (default .pkb-dirs)")
        parser.add_argument("--source", default="togethercomputer/ParallelKernelBench@dab0830",
                            help="where the directories come from, as the plan records it")
        parser.add_argument("--out", default=str(settings.PKB_MEASUREMENTS_DIR / "board" / PLAN_NAME))

    def handle(self, *args: Any, **options: Any) -> None:
        dirs = Path(options["dirs"])
        if not dirs.is_dir():
            raise CommandError(f"no directory {dirs}: extract ParallelKernelBench's solutions_* "
                               "directories there first (docs/runs.md says how)")
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=settings.BASE_DIR,
                                capture_output=True, text=True).stdout.strip() or "unknown"
        try:
            plan = make_plan(dirs, options["source"], commit)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        out = Path(options["out"])
        out.write_text(json.dumps(plan, indent=1) + "\n")
        counts = ", ".join(f"{name} {len(files)}" for name, files in plan["directories"].items())
        faults = sum(len(entries) for entries in plan["model_faults"].values())
        self.stdout.write(f"{plan['files']} files planned ({counts}) and {faults} refused for what "
                          f"the model wrote (failed attempts of their problems): {out}")
