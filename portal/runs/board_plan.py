"""What the model board sets out to evaluate: ``docs/measurements/board/plan.json``.

The board's results arrive in batches (``scripts/device/board_batch.sh``), so for days a seeded
run holds only the files evaluated so far. The plan lists, per ParallelKernelBench directory,
every file the import accepts, as the batches' dry import finds them, so that a run page can say
"20 of 40 files" instead of looking finished. It is made where the directories are at hand
(``.venv/bin/python manage.py board_plan``) and committed; seeding reads it on machines that lack them.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from .archives import Entry
from .pkb.importer import plans_from_pkb

PLAN_NAME = "plan.json"


def make_plan(dirs: Path, source: str, commit: str) -> dict[str, Any]:
    """The accepted files of every ``solutions_*`` directory under ``dirs`` (the planner of
    ``POST runs/pkb-import/``, which the batches' dry import calls), with where they came from.
    Directories whose files are all refused (ParallelKittens) are left out, as the batches
    leave them out."""
    directories: dict[str, list[str]] = {}
    for directory in sorted(d for d in dirs.glob("solutions_*") if d.is_dir()):
        entries = [Entry(p.name, p.read_bytes()) for p in sorted(directory.glob("*.py"))]
        accepted = [plan.name for plan in plans_from_pkb(entries) if not plan.code]
        if accepted:
            directories[directory.name] = accepted
    if not directories:
        raise ValueError(f"no solutions_* directory with an importable file under {dirs}")
    return {"source": source, "planned_at_commit": commit, "date": date.today().isoformat(),
            "files": sum(len(names) for names in directories.values()), "directories": directories}


def planned_counts(board: Path) -> dict[str, int]:
    """Directory -> files it plans, from ``board``'s plan; {} where there is no plan. ValueError
    names what is wrong with one that is there."""
    path = board / PLAN_NAME
    if not path.is_file():
        return {}
    try:
        plan = json.loads(path.read_text())
        directories = plan["directories"]
        return {str(name): len(files) for name, files in directories.items()
                if isinstance(files, list)}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{PLAN_NAME}: not a board plan ({type(exc).__name__}: {exc}); remake it "
                         "with .venv/bin/python manage.py board_plan") from None
