"""Runs seeded from committed board results: ``docs/measurements/board/*-results.jsonl``.

Each line is one ParallelKernelBench file evaluated through the real portal path by
``scripts/device/board_batch.sh`` on a GPU host: the file, its PKB id and problem, the
provenance (commit, date, hardware, host, torch, sandbox) and the whole submission with the
evaluator's report. One directory on one hardware becomes one run, as ``POST
runs/pkb-import/`` makes it (the same fields, k = 1, each PKB problem its own problem of the
run); each line becomes a finished submission whose numbers come from its stored report
through ``apply_report``, as a worker's callback sets them. Nothing is dispatched.

Idempotent: a line is stored once (``Submission.import_path`` names the file and the line's
key), so new lines of a later batch add rows and old ones are left alone; a later line for
the same key replaces an earlier one only in the file (the batch's rule), not in the database.

The board files' sources are not committed (they are ParallelKernelBench's model outputs);
where a copy of the directories is given (``pkb_dirs``) and its file is the one evaluated
(same sha256 before and after wrapping), the submission keeps the exact evaluated source,
otherwise a line saying which file it was. The import's note on a file (it relies on NVLink
multicast; it is evaluated in another dtype) is the line's ``import_message`` where the batch
recorded it, else worked out again here (the multicast part only with the source at hand).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils.dateparse import parse_datetime

from portal.catalog.models import Hardware, Problem
from portal.lib import reports
from portal.submissions.importing import system_user, version_for
from portal.submissions.lifecycle import apply_report
from portal.submissions.models import AIModel, Status, Submission
from portal.submissions.services import get_model, next_attempt

from .archives import Entry
from .board_plan import BoardPlan, read_plan
from .models import Run, RunSample
from .pkb import names
from .pkb.adapters import adapter_for
from .pkb.importer import plans_from_pkb
from .services import evaluation_dtype, problem_key

RESULTS_GLOB = "*-results.jsonl"
REQUIRED = ("key", "directory", "file", "pkb_id", "problem", "status", "hardware", "git", "date",
            "host", "sandbox", "submission")


@dataclass
class BoardSeed:
    runs_created: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def load_rows(path: Path) -> dict[str, dict[str, Any]]:
    """The lines of one results file by key; a later line for a key replaces an earlier one
    (as scripts/device/board_batch.py reads its state). ValueError names a bad line."""
    found: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path.name} line {number}: not JSON ({exc})") from None
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise ValueError(f"{path.name} line {number}: no {', '.join(missing)} (a line of "
                             "scripts/device/board_batch.py's board-results.jsonl has them)")
        found[row["key"]] = row
    return found


def seed_board(directory: Path, root: Path, pkb_dirs: Path | None = None) -> BoardSeed:
    result = BoardSeed()
    try:
        plan = read_plan(directory)
    except ValueError as exc:  # the runs still seed, without saying how much is left
        result.errors.append(str(exc))
        plan = BoardPlan()
    for path in sorted(directory.glob(RESULTS_GLOB)) if directory.is_dir() else []:
        rel = str(path.relative_to(root) if path.is_relative_to(root) else path)
        try:
            rows = load_rows(path)
        except (OSError, ValueError) as exc:
            result.errors.append(f"{rel}: {exc}")
            continue
        groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for row in rows.values():
            groups[(row["directory"], row["hardware"])].append(row)
        for (run_dir, hardware), group in sorted(groups.items()):
            try:
                run = _run_for(rel, run_dir, hardware, group, plan.counts.get(run_dir), result)
            except ValueError as exc:
                result.errors.append(f"{rel} {run_dir}: {exc}")
                continue
            for row in sorted(group, key=lambda r: (r["pkb_id"] or 0, r["file"])):
                label = f"{rel}#{row['key']}"
                try:
                    added = _add_sample(run, row, label, pkb_dirs)
                except ValueError as exc:
                    result.errors.append(f"{label}: {exc}")
                    continue
                (result.added if added else result.unchanged).append(label)
            for fault in plan.faults.get(run_dir, []):
                try:
                    _add_model_fault(run, fault)
                except ValueError as exc:
                    result.errors.append(f"{rel} {run_dir}/{fault['file']}: {exc}")
    return result


def _add_model_fault(run: Run, fault: dict[str, Any]) -> None:
    """A file the import refuses for what the model wrote, stored as the import stores it: a
    refused sample of the problem it answers, which the run's scores count as a failed attempt
    (scoring.MODEL_FAULTS). No batch evaluates it, so only the plan brings it to a seeded run."""
    if run.samples.filter(status=RunSample.REJECTED, name=str(fault["file"])[:300]).exists():
        return
    problem = Problem.objects.filter(slug=str(fault["problem"])).first()
    if problem is None:
        raise ValueError(f"no problem {fault['problem']!r} in the catalog")
    RunSample.objects.create(run=run, problem=problem, name=str(fault["file"])[:300],
                             pkb_id=fault["pkb_id"], status=RunSample.REJECTED,
                             code=str(fault["code"])[:40], message=str(fault["message"]))


def written_for(pkb_hardware: str) -> str:
    """PKB's hardware label as words: ``h100_8`` -> ``H100 x8``."""
    gpu, _, count = pkb_hardware.partition("_")
    return f"{gpu.upper()} x{count}" if count else gpu.upper()


def provenance_note(run_dir: str, hardware: Hardware, rows: list[dict[str, Any]], rel: str) -> str:
    """Where the run's results come from, as the run page and the runs table show it."""
    parsed = names.parse_run_dir(run_dir)
    dates = sorted(r["date"] for r in rows)
    commits = ", ".join(sorted({str(r["git"]) for r in rows}))
    hosts = "; ".join(sorted({str(r["host"]) for r in rows}))
    torch = ", ".join(sorted({str(r.get("torch") or "?") for r in rows}))
    sandbox = ", ".join(sorted({str(r["sandbox"]) for r in rows}))
    span = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    written = ("" if parsed.hardware == "none" else
               f" Evaluated on {hardware.name} ({hardware.slug}): the files were written for "
               f"{written_for(parsed.hardware)} by their authors.")
    return (f"ParallelKernelBench directory {run_dir} (generated for {parsed.hardware}). "
            f"Seeded from committed reports ({rel}): {len(rows)} files evaluated through the "
            f"portal by scripts/device/board_batch.sh on {hardware.slug}, host {hosts}, commit "
            f"{commits}, {span}, torch {torch}, sandbox {sandbox}.{written}")


def _move_to_model(run: Run, model: AIModel) -> None:
    """A run seeded under its bare model name before directories were ranked apart (the Triton
    directory shared Gemini 3 Pro's CUDA row until 2026-11-29): the run and its samples'
    submissions move to the directory's own entry, attempts numbered again in the order made."""
    with transaction.atomic():
        run.model = model
        run.save(update_fields=["model"])
        ids = list(run.samples.exclude(submission=None).values_list("submission_id", flat=True))
        for sub in Submission.objects.filter(pk__in=ids).order_by("created_at", "pk"):
            sub.model = model
            sub.attempt = next_attempt(model, sub.problem_version, sub.hardware)
            sub.save(update_fields=["model", "attempt"])


def _run_for(rel: str, run_dir: str, hardware_slug: str, rows: list[dict[str, Any]],
             planned: int | None, result: BoardSeed) -> Run:
    """The run of one directory on one hardware, with the fields ``runs/pkb-import/`` gives it."""
    hardware = Hardware.objects.filter(slug=hardware_slug).first()
    if hardware is None:
        raise ValueError(f"no hardware {hardware_slug!r}: commit its profile, hardware/"
                         f"{hardware_slug}.json (pkb probe on that host), with its results")
    parsed = names.parse_run_dir(run_dir)
    note = provenance_note(run_dir, hardware, rows, rel)
    run = Run.objects.filter(seeded_from=rel, imported_from=run_dir, hardware=hardware).first()
    if run is None:
        run = Run.objects.create(
            owner=system_user(), model=get_model(parsed.entry, parsed.provider),
            provider=parsed.provider[:100], sampling={}, hardware=hardware, k=1, note=note,
            backend="cuda" if parsed.backend == "parallelkittens" else parsed.backend,
            precision=parsed.precision, imported_from=run_dir[:300], seeded_from=rel[:300],
            files_planned=planned)
        result.runs_created.append(f"{rel} {run_dir}")
    else:  # a later batch added lines, or the plan changed: the run says so
        if run.model.name != parsed.entry:
            _move_to_model(run, get_model(parsed.entry, parsed.provider))
        planned = run.files_planned if planned is None else planned  # no word: left as it was
        if (run.note, run.files_planned) != (note, planned):
            run.note, run.files_planned = note, planned
            run.save(update_fields=["note", "files_planned"])
    return run


def _evaluated_source(row: dict[str, Any], sha: str, pkb_dirs: Path | None) -> tuple[str, str]:
    """(source, note): the wrapped file as evaluated where a copy of it is at hand, else a line
    naming the file. The note is the import's own (e.g. it relies on NVLink multicast)."""
    raw_path = pkb_dirs / row["directory"] / row["file"] if pkb_dirs else None
    if raw_path is not None and raw_path.is_file():
        data = raw_path.read_bytes()
        if hashlib.sha256(data).hexdigest() == row.get("source_sha256"):
            plan = plans_from_pkb([Entry(f"{row['directory']}/{row['file']}", data)])[0]
            if plan.source is not None and hashlib.sha256(plan.source).hexdigest() == sha:
                return plan.source.decode(), plan.message
    return (f"# {row['directory']}/{row['file']} (sha256 {row.get('source_sha256', '?')}), wrapped "
            f"for {row['problem']}: the evaluated source (sha256 {sha}) is not committed with "
            "its report.\n"), ""


@transaction.atomic
def _add_sample(run: Run, row: dict[str, Any], label: str, pkb_dirs: Path | None) -> bool:
    """One line as an accepted sample of ``run``; False when it is already there."""
    if Submission.objects.filter(import_path=label[:500]).exists():
        return False
    sub_json = row["submission"]
    report = sub_json.get("report")
    finished = row["status"] == Status.FINISHED
    if finished:
        if not isinstance(report, dict):
            raise ValueError("a finished line without its report")
        if (problem := reports.schema_error(report)) is not None:
            raise ValueError(f"the report does not match evaluator/report.schema.json at {problem}")
        if reports.text(report, "hardware_profile") != run.hardware.slug:
            raise ValueError(f"the report ran on {reports.text(report, 'hardware_profile')!r}, "
                             f"the line says {run.hardware.slug!r}")
        version = version_for(report)
        sha = reports.text(report, "solution", "sha256")
    else:  # lost by the infrastructure: kept, as the import keeps it, but not an attempt
        version = version_for({"problem": {"slug": row["problem"],
                                           "version": sub_json.get("problem_version")}})
        sha = str(sub_json.get("source_sha256") or "")
    if version.problem.slug != row["problem"]:
        raise ValueError(f"the report is of {version.problem.slug}, the line says {row['problem']}")
    key = problem_key(version.problem.slug, row["pkb_id"])
    if any(problem_key(s.problem.slug, s.pkb_id) == key for s in
           run.samples.filter(status=RunSample.ACCEPTED).select_related("problem")):
        raise ValueError(f"the run already has its k = {run.k} sample of {key} from another file")
    text, message = _evaluated_source(row, sha, pkb_dirs)
    dtype, dtype_note = evaluation_dtype(run.precision, version)
    if "import_message" in row:  # the import's own note, as stored then (batches since this field)
        message, dtype_note = str(row["import_message"] or ""), ""
    setting = reports.mapping(report, "setting") if finished else {}
    sub = Submission(
        user=system_user(), model=run.model, problem_version=version, hardware=run.hardware,
        backend=run.backend, world_size=int(setting.get("world_size") or sub_json["world_size"]),
        size=str(setting.get("size") or sub_json.get("size") or run.hardware.size),
        dtype=dtype, attempt=next_attempt(run.model, version, run.hardware), source=text,
        source_sha256=sha, origin="import", import_path=label[:500],
        status=Status.FINISHED if finished else Status.FAILED,
        status_reason="" if finished else str(row.get("status_reason") or "")[:500],
        created_at=parse_datetime(sub_json.get("created_at") or "") or parse_datetime(row["date"]),
        started_at=parse_datetime(sub_json.get("started_at") or ""),
        finished_at=parse_datetime(sub_json.get("finished_at") or ""))
    if finished:
        apply_report(sub, report)
    sub.save()
    index = (run.samples.filter(problem=version.problem, status=RunSample.ACCEPTED)
             .aggregate(n=Max("index"))["n"])
    adapter = adapter_for(int(row["pkb_id"]), version.problem.slug) if row["pkb_id"] else None
    RunSample.objects.create(
        run=run, submission=sub, problem=version.problem, name=row["file"][:300],
        pkb_id=row["pkb_id"], adapter=adapter.name if adapter else "", status=RunSample.ACCEPTED,
        message="; ".join(m for m in (message, dtype_note) if m),
        index=0 if index is None else index + 1)
    return True
