"""Import measured reference timings (``pkb check-references --time --json``) as baselines.

A manifest, ``reference-timings.json`` in the measurements folder, says which files belong to
which hardware profile, world size and size preset (the files themselves do not name the
machine). Files of one run are listed oldest first; as in ``scripts/device/render_refs.py`` a
later file's row replaces an earlier one's for the same problem. Only rows with status ``ok``
and a median are stored. A row names the problem version it measured (``version``) and is tied
to it; rows of older files without one are tied to the version current at their first import,
and a later seed never moves a timing onto a newer version (that version was not measured).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from django.db import transaction

from .models import Hardware, Problem, ProblemVersion, ReferenceTiming

MANIFEST = "reference-timings.json"
VALUES = ("median_ms", "p10_ms", "p90_ms", "roofline_ms", "roofline_bound", "roofline_fraction")


@dataclass
class TimingImport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    not_ok: list[str] = field(default_factory=list)  # failed or untimed: no baseline from it
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Run:
    hardware: str
    world_size: int
    size: str
    files: list[str]
    measured_on: date | None = None
    command: str = ""


def load_manifest(directory: Path) -> list[Run]:
    path = directory / MANIFEST
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    return [Run(hardware=str(r["hardware"]), world_size=int(r["world_size"]), size=str(r["size"]),
                files=[str(f) for f in r["files"]], command=str(r.get("command") or ""),
                measured_on=date.fromisoformat(r["measured_on"]) if r.get("measured_on") else None)
            for r in data.get("runs", [])]


def merged_rows(directory: Path, run: Run, result: TimingImport) -> dict[str, dict[str, Any]]:
    """slug -> the latest row for it across the run's files, with ``file`` added."""
    rows: dict[str, dict[str, Any]] = {}
    for name in run.files:
        try:
            data = json.loads((directory / name).read_text())
        except (OSError, ValueError) as exc:
            result.errors.append(f"{name}: {exc}")
            continue
        if data.get("size") != run.size:
            result.errors.append(f"{name}: size {data.get('size')!r}, the manifest says {run.size!r}")
            continue
        for row in data.get("rows", []):
            if int(row.get("world_size") or 0) == run.world_size:
                rows[str(row["slug"])] = {**row, "file": name}
    return rows


def is_measured(row: dict[str, Any]) -> bool:
    return row.get("status") == "ok" and isinstance(row.get("median_ms"), (int, float))


def import_timings(directory: Path) -> TimingImport:
    result = TimingImport()
    try:
        runs = load_manifest(directory)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        result.errors.append(f"{directory / MANIFEST}: {exc}")
        return result
    for run in runs:
        hardware = Hardware.objects.filter(slug=run.hardware).first()
        if hardware is None:
            result.errors.append(f"{MANIFEST}: hardware {run.hardware!r} is not loaded")
            continue
        for slug, row in merged_rows(directory, run, result).items():
            _import_row(slug, row, run, hardware, directory, result)
    return result


@transaction.atomic
def _import_row(slug: str, row: dict[str, Any], run: Run, hardware: Hardware, directory: Path,
                result: TimingImport) -> None:
    label = f"{slug} ({row['file']})"
    problem = Problem.objects.filter(slug=slug).first()
    if problem is None:
        result.errors.append(f"{label}: unknown problem")
        return
    source = _source_name(directory, row["file"])
    run_files = [_source_name(directory, f) for f in run.files]
    of_run = ReferenceTiming.objects.filter(
        problem_version__problem=problem, hardware=hardware, world_size=run.world_size,
        size=run.size, source_file__in=run_files)
    if not is_measured(row):
        # A later failed run replaces an earlier measurement, as in the rendered tables.
        of_run.delete()
        result.not_ok.append(f"{label}: {row.get('status')} {row.get('message') or ''}".strip())
        return
    values = {k: row.get(k) for k in VALUES}
    values["roofline_bound"] = values["roofline_bound"] or ""
    same_file = of_run.filter(source_file=source).first()
    if same_file is not None and all(getattr(same_file, k) == v for k, v in values.items()):
        result.unchanged.append(label)
        return
    # A row that names the version it measured is tied to that version (and skipped when that
    # version is not loaded: the problem changed since). Older files name none: already imported,
    # the timing stays where it was; new, it belongs to the version current now.
    if row.get("version"):
        version = ProblemVersion.objects.filter(problem=problem, version=row["version"]).first()
        if version is None:
            result.not_ok.append(f"{label}: measured version {row['version']} is not loaded "
                                 "(the problem changed since it was timed)")
            return
    else:
        version = same_file.problem_version if same_file else problem.current_version()
    if version is None:
        result.errors.append(f"{label}: the problem has no loaded version")
        return
    _, created = ReferenceTiming.objects.update_or_create(
        problem_version=version, hardware=hardware, world_size=run.world_size, size=run.size,
        defaults={**values, "source_file": source, "command": run.command,
                  "measured_on": run.measured_on})
    (result.created if created else result.updated).append(label)


def _source_name(directory: Path, name: str) -> str:
    """The file as the repository names it (docs/measurements/...), else as given."""
    from django.conf import settings

    path = (directory / name).resolve()
    base = Path(settings.BASE_DIR).resolve()
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)
