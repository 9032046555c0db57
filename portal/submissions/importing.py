"""Seeded data that is real: committed evaluator reports, and reference runs queued for real.

``docs/results/**/*.json`` may hold one report, a list of reports, or ``{"model": ...,
"provider": ..., "reports": [...]}``; a report may also carry ``model``/``source`` keys. The
solution's source is taken from the file (``source``/``solution_source``), from ``source_path``
(a file in the repository whose sha256 matches the report's), or from a sibling ``.py`` with the
same stem; otherwise the submission says that the source was not committed.

Sweep reports (``pkb sweep``; a file may hold one, a list, or ``{"sweeps": [...]}``) are attached
to the finished submission of the same file (sha256), problem, hardware and world size, which
its own ``pkb eval`` report made: a sweep never stands on a leaderboard alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from portal.catalog.models import Hardware, Problem, ProblemVersion
from portal.lib import hardware as hw
from portal.lib import reports
from portal.lib.reports import looks_like_report

from portal.lib.sweeps import sweep_error

from .lifecycle import apply_report
from .models import AIModel, Status, Submission, SweepStatus
from .services import Target, create, get_model, next_attempt

log = logging.getLogger(__name__)
SYSTEM_USER = "pkb"


@dataclass
class ImportResult:
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def system_user() -> Any:
    user, created = get_user_model().objects.get_or_create(
        username=SYSTEM_USER, defaults={"is_active": False, "first_name": "PKB"})
    if created:
        user.set_unusable_password()
        user.save()
    return user


def _entries(data: Any, defaults: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    if isinstance(data, list):
        for item in data:
            yield from _entries(item, defaults)
    elif looks_like_report(data):
        yield data, defaults
    elif isinstance(data, dict) and isinstance(data.get("reports"), list):
        inner = {**defaults, **{k: v for k, v in data.items() if k != "reports"}}
        yield from _entries(data["reports"], inner)


def _model_of(report: dict[str, Any], meta: dict[str, Any]) -> tuple[str, str]:
    raw = report.get("model", meta.get("model", "reference"))
    if isinstance(raw, dict):
        return str(raw.get("name") or "reference"), str(raw.get("provider") or "")
    return str(raw or "reference"), str(report.get("provider", meta.get("provider", "")) or "")


def _source_of(path: Path, report: dict[str, Any], meta: dict[str, Any]) -> str:
    for key in ("source", "solution_source"):
        text = report.get(key) or meta.get(key)
        if isinstance(text, str) and text.strip():
            return text
    sha = reports.text(report, "solution", "sha256") or "?"
    # A committed solution file, named relative to the repository, as long as it is still the
    # exact file that was evaluated.
    source_path = report.get("source_path") or meta.get("source_path")
    if isinstance(source_path, str):
        candidate = (settings.BASE_DIR / source_path).resolve()
        if candidate.is_relative_to(settings.BASE_DIR) and candidate.is_file():
            data = candidate.read_bytes()
            if hashlib.sha256(data).hexdigest() == sha:
                return data.decode(errors="replace")
    sibling = path.with_suffix(".py")
    if sibling.exists():
        return sibling.read_text(errors="replace")
    return f"# The source of this solution was not committed with its report (sha256 {sha}).\n"


def _hardware_for(report: dict[str, Any]) -> Hardware:
    profile_id = reports.text(report, "hardware_profile")
    setting = reports.mapping(report, "setting")
    if not profile_id:
        if setting.get("device") == "cpu":
            return Hardware.objects.active().filter(kind="cpu").order_by("builtin", "slug").first() or Hardware.objects.get(slug=hw.LOCAL_CPU["id"])
        raise ValueError("a GPU report without hardware_profile cannot be placed on a leaderboard")
    found = Hardware.objects.filter(slug=profile_id).first()
    if found:
        return found
    # The profile is not published (yet): record that the machine exists, nothing more.
    ws = int(setting.get("world_size") or 2)
    return Hardware.objects.create(slug=str(profile_id), name=str(profile_id), kind="gpu", gpus=ws,
                                   world_size=ws, profile={"id": profile_id, "unpublished": True})


def version_for(report: dict[str, Any]) -> ProblemVersion:
    ref = reports.mapping(report, "problem")
    problem = Problem.objects.filter(slug=ref.get("slug")).first()
    if problem is None:
        raise ValueError(f"unknown problem {ref.get('slug')!r}")
    version, _ = ProblemVersion.objects.get_or_create(
        problem=problem, version=str(ref.get("version") or "unknown"),
        defaults={"source_recorded": False, "title": problem.title})
    return version


@transaction.atomic
def import_report(path: Path, index: int, report: dict[str, Any], meta: dict[str, Any],
                  label: str) -> bool:
    if Submission.objects.filter(import_path=label).exists():
        return False
    version, hardware = version_for(report), _hardware_for(report)
    name, provider = _model_of(report, meta)
    model = get_model(name, provider)
    setting = reports.mapping(report, "setting")
    text = _source_of(path, report, meta)
    finished = parse_datetime(reports.text(report, "finished_at")) or timezone.now()
    sub = Submission(
        user=system_user(), model=model, problem_version=version, hardware=hardware,
        backend="reference" if model.kind == "reference" else str(meta.get("backend", "cuda")),
        world_size=int(setting.get("world_size") or hardware.world_size),
        size=str(setting.get("size") or hardware.size), dtype=str(setting.get("dtype") or ""),
        attempt=next_attempt(model, version, hardware), source=text,
        source_sha256=reports.text(report, "solution", "sha256"),
        origin="import", import_path=label, status=Status.FINISHED,
        credited_to=provider[:100] if model.kind == "human" else "",
        created_at=parse_datetime(reports.text(report, "started_at")) or finished,
        started_at=parse_datetime(reports.text(report, "started_at")), finished_at=finished)
    apply_report(sub, report)
    sub.status_reason = ""
    sub.save()
    return True


def _sweeps(data: Any) -> Iterator[dict[str, Any]]:
    if isinstance(data, list):
        for item in data:
            yield from _sweeps(item)
    elif isinstance(data, dict) and data.get("schema") == "pkb-sweep":
        yield data
    elif isinstance(data, dict) and isinstance(data.get("sweeps"), list):
        yield from _sweeps(data["sweeps"])


@transaction.atomic
def import_sweep(sweep: dict[str, Any]) -> bool:
    """Attach ``sweep`` to the evaluation of the same file; False when it is already attached."""
    slug, ws = reports.text(sweep, "problem", "slug"), int(reports.mapping(sweep, "setting").get("world_size") or 0)
    sha, profile = reports.text(sweep, "solution", "sha256"), reports.text(sweep, "hardware_profile")
    sub = (Submission.objects.finished().filter(problem_version__problem__slug=slug, world_size=ws,
                                                source_sha256=sha, hardware__slug=profile)
           .select_for_update().order_by("-finished_at").first())
    if sub is None:
        raise ValueError(f"no finished evaluation of this file (sha256 {sha[:12]}) of {slug} on {profile or '?'} "
                         f"at world size {ws} to attach the sweep to; commit its pkb eval report too")
    if sub.sweep == sweep:
        return False
    problem = sweep_error(sweep, problem=slug, world_size=ws, source_sha256=sub.source_sha256)
    if problem is not None:
        raise ValueError(f"the sweep {problem}")
    sub.sweep, sub.sweep_status, sub.sweep_reason = sweep, SweepStatus.FINISHED, ""
    sub.sweep_finished_at = parse_datetime(reports.text(sweep, "finished_at")) or timezone.now()
    sub.save(update_fields=["sweep", "sweep_status", "sweep_reason", "sweep_finished_at"])
    return True


def import_results(directory: Path, root: Path) -> ImportResult:
    result = ImportResult()
    files = []
    for path in sorted(directory.rglob("*.json")) if directory.exists() else []:
        try:
            files.append((path, json.loads(path.read_text())))
        except (OSError, ValueError) as exc:
            result.errors.append(f"{path}: {exc}")
    for path, data in files:
        rel = path.relative_to(root) if path.is_relative_to(root) else path
        for index, (report, meta) in enumerate(_entries(data, {})):
            label = f"{rel}#{index}"
            if (problem := reports.schema_error(report)) is not None:
                result.errors.append(f"{label}: does not match evaluator/report.schema.json at {problem}")
                continue
            try:
                done = import_report(path, index, report, meta, label)
            except Exception as exc:
                result.errors.append(f"{label}: {type(exc).__name__}: {exc}")
                continue
            (result.imported if done else result.skipped).append(label)
    # Sweeps after every report: each attaches to an evaluation, wherever its file is.
    for path, data in files:
        rel = path.relative_to(root) if path.is_relative_to(root) else path
        for index, sweep in enumerate(_sweeps(data)):
            label = f"{rel}#sweep{index}"
            try:
                done = import_sweep(sweep)
            except Exception as exc:
                result.errors.append(f"{label}: {type(exc).__name__}: {exc}")
                continue
            (result.imported if done else result.skipped).append(label)
    return result


def reference_solution(version: ProblemVersion) -> str:
    return (version.source_text.rstrip() + "\n\n\n# The baseline: the reference itself.\n"
            "solution = reference\n")


def enqueue_baselines(hardware: Hardware) -> list[str]:
    """Queue a real evaluation of each problem's reference where this hardware has none yet."""
    reference = get_model("reference")
    queued = []
    for problem in Problem.objects.active():
        version = problem.current_version()
        world_size = hardware.ranked_world_size(problem.world_sizes)
        if version is None or world_size is None or not version.source_recorded:
            continue
        have = Submission.objects.filter(model=reference, problem_version=version,
                                         hardware=hardware).exclude(status=Status.FAILED)
        if have.exists():
            continue
        create(user=system_user(), target=Target(version, hardware, world_size),
               backend="reference", model=reference, text=reference_solution(version),
               origin="baseline")
        queued.append(problem.slug)
    return queued


__all__ = ["AIModel", "enqueue_baselines", "import_results", "system_user"]
