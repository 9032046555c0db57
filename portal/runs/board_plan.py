"""What the model board sets out to evaluate: ``docs/measurements/board/plan.json``.

The board's results arrive in batches (``scripts/device/board_batch.sh``), so for days a seeded
run holds only the files evaluated so far. The plan lists, per ParallelKernelBench directory,
every file the import accepts, as the batches' dry import finds them, so that a run page can say
"20 of 40 files" instead of looking finished; and the files the import refuses for what the model
wrote (a syntax error, an empty file: ``scoring.MODEL_FAULTS``), which a run counts as failed
attempts and which no batch evaluates. It is made where the directories are at hand
(``.venv/bin/python manage.py board_plan``) and committed; seeding reads it on machines that
lack them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from .archives import Entry
from .pkb.importer import plans_from_pkb
from .scoring import MODEL_FAULTS

PLAN_NAME = "plan.json"
FAULT_FIELDS = ("file", "code", "problem", "pkb_id", "message")


@dataclass
class BoardPlan:
    counts: dict[str, int] = field(default_factory=dict)  # directory -> files it plans
    faults: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # directory -> refusals
    files: dict[str, list[str]] = field(default_factory=dict)  # directory -> the files it plans


def make_plan(dirs: Path, source: str, commit: str) -> dict[str, Any]:
    """The accepted files of every ``solutions_*`` directory under ``dirs`` (the planner of
    ``POST runs/pkb-import/``, which the batches' dry import calls) and its files refused for the
    model's fault at a problem the run would evaluate, with where they came from. Directories
    whose files are all refused (ParallelKittens) are left out, as the batches leave them out."""
    directories: dict[str, list[str]] = {}
    faults: dict[str, list[dict[str, Any]]] = {}
    for directory in sorted(d for d in dirs.glob("solutions_*") if d.is_dir()):
        entries = [Entry(p.name, p.read_bytes()) for p in sorted(directory.glob("*.py"))]
        plans = plans_from_pkb(entries)
        accepted = [plan.name for plan in plans if not plan.code]
        if not accepted:
            continue
        directories[directory.name] = accepted
        refused = [{"file": p.name, "code": p.code, "problem": p.problem, "pkb_id": p.pkb_id,
                    "message": p.message} for p in plans if p.code in MODEL_FAULTS and p.problem]
        if refused:
            faults[directory.name] = refused
    if not directories:
        raise ValueError(f"no solutions_* directory with an importable file under {dirs}")
    return {"source": source, "planned_at_commit": commit, "date": date.today().isoformat(),
            "files": sum(len(names) for names in directories.values()), "directories": directories,
            "model_faults": faults}


def read_plan(board: Path) -> BoardPlan:
    """``board``'s plan; an empty one where there is none. ValueError names what is wrong with
    one that is there."""
    path = board / PLAN_NAME
    if not path.is_file():
        return BoardPlan()
    try:
        plan = json.loads(path.read_text())
        files = {str(name): [str(f) for f in names] for name, names in plan["directories"].items()
                 if isinstance(names, list)}
        counts = {name: len(names) for name, names in files.items()}
        faults = {str(name): [{key: entry[key] for key in FAULT_FIELDS} for entry in entries]
                  for name, entries in (plan.get("model_faults") or {}).items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{PLAN_NAME}: not a board plan ({type(exc).__name__}: {exc}); remake it "
                         "with .venv/bin/python manage.py board_plan") from None
    return BoardPlan(counts, faults, files)
