"""Mirror problems/ and the hardware profiles into the database (idempotent)."""

from __future__ import annotations

import importlib
import inspect
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from django.conf import settings
from django.db import transaction

from portal.lib import hardware as hw

from .models import Hardware, Problem, ProblemVersion

log = logging.getLogger(__name__)


@dataclass
class LoadResult:
    created: list[str] = field(default_factory=list)
    new_versions: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    hardware: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _safely(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # a problem under construction must not stop the whole catalog
        return {"error": f"{type(exc).__name__}: {exc}"}


def problem_details(problem: Any) -> dict[str, Any]:
    """Everything the pages show that needs the module: computed once per version."""
    from evaluator import catalog
    from problems.spec import dtype_name

    sizes = list(problem.sizes)
    return {
        "sizes": {k: dict(v) for k, v in problem.sizes.items()},
        "dtypes": [dtype_name(d) for d in problem.dtypes],
        "tolerances": {dtype_name(d): [t.atol, t.rtol] for d, t in problem.tolerances.items()},
        "world_sizes": list(problem.world_sizes),
        "world_size_note": problem.world_size_note,
        "may_overwrite": list(problem.may_overwrite),
        "tags": list(problem.tags),
        "process_groups": {str(w): _safely(lambda w=w: problem.process_groups(w))
                           for w in problem.world_sizes},
        "shapes": {str(w): {s: _safely(lambda w=w, s=s: catalog.shapes(problem, w, s)) for s in sizes}
                   for w in problem.world_sizes},
        "traffic": {str(w): {s: _safely(lambda w=w, s=s: catalog.traffic(problem, w, s)) for s in sizes}
                    for w in problem.world_sizes},
        "sweep": sweep_details(problem),
    }


def sweep_details(problem: Any) -> dict[str, Any] | None:
    """The problem's sweep axis (docs/sweeps.md), or None: submissions may ask for a sweep only
    where there is one."""
    axis = getattr(problem, "sweep", None)
    if axis is None:
        return None
    return {"param": axis.param, "collective": axis.collective, "bytes": list(axis.bytes), "base": axis.base,
            "points": {str(w): _safely(lambda w=w: _sweep_traffic(problem, w)) for w in problem.world_sizes}}


def _sweep_traffic(problem: Any, world_size: int) -> dict[str, Any]:
    """The sweep's points at one world size with their roofline traffic: the problem page draws
    the roofline's bus bandwidth from them on each hardware's rates, before any sweep has run."""
    from evaluator.hardware.collectives import bus_factor
    from evaluator.sweep import sweep_points

    rows = []
    for point in sweep_points(problem, world_size):
        t = problem.traffic(problem.setting(world_size, point.size))
        rows.append({"message_bytes": point.message_bytes, "link_bytes": float(t.link_bytes),
                     "hbm_bytes": float(t.hbm_bytes), "flops": float(t.flops)})
    return {"bus_factor": bus_factor(problem.sweep.collective, world_size), "rows": rows}


def signature_of(problem: Any) -> str:
    return f"def solution{inspect.signature(problem.reference)}:"


def _registry(package: str) -> Any:
    return importlib.import_module(package)


@transaction.atomic
def upsert_problem(problem: Any, source: str, version: str, result: LoadResult) -> Problem:
    row, created = Problem.objects.get_or_create(
        slug=problem.slug, defaults={"number": problem.id, "title": problem.title})
    row.number, row.title, row.retired = problem.id, problem.title, False
    row.categories = list(problem.categories)
    row.collectives = list(problem.collectives)
    row.tag_text = "," + ",".join(problem.tags) + "," if problem.tags else ""
    row.source_codebase = problem.source.codebase
    row.source_function = problem.source.function
    row.source_url = problem.source.url
    row.world_sizes = list(problem.world_sizes)
    row.save()
    existing = row.versions.filter(version=version).first()
    if existing and existing.source_recorded:
        if not existing.is_current:
            row.versions.update(is_current=False)
            existing.is_current = True
            existing.save(update_fields=["is_current"])
        result.unchanged.append(problem.slug)
        return row
    row.versions.update(is_current=False)
    fields = dict(is_current=True, source_recorded=True, title=problem.title,
                  description=problem.description, source_text=source,
                  signature=signature_of(problem), details=problem_details(problem))
    if existing:  # known only from an imported report until now: fill it in
        ProblemVersion.objects.filter(pk=existing.pk).update(**fields)
    else:
        ProblemVersion.objects.create(problem=row, version=version, **fields)
    (result.created if created else result.new_versions).append(problem.slug)
    return row


def load_problems(package: str, result: LoadResult) -> None:
    registry = _registry(package)
    seen = set()
    for problem in registry.all_problems():
        try:
            upsert_problem(problem, registry.source_text(problem), registry.version(problem), result)
            seen.add(problem.slug)
        except Exception as exc:
            log.exception("could not load problem %s", problem.slug)
            result.errors.append(f"{problem.slug}: {type(exc).__name__}: {exc}")
    gone = Problem.objects.filter(retired=False).exclude(slug__in=seen)
    result.retired.extend(gone.values_list("slug", flat=True))
    gone.update(retired=True)


def upsert_hardware(profile: hw.Profile) -> Hardware:
    gpus = hw.gpu_count(profile)
    is_gpu = hw.is_gpu(profile)
    builtin = bool(profile.get("builtin"))
    world_size = gpus if is_gpu and gpus >= 2 else int(profile.get("world_size") or 2)
    row, _ = Hardware.objects.update_or_create(slug=str(profile["id"]), defaults={
        "name": hw.display_name(profile),
        "kind": "gpu" if is_gpu else "cpu", "gpus": gpus, "world_size": world_size,
        "builtin": builtin, "profile": profile, "retired": False,
    })
    return row


def load_hardware(directory: Path, result: LoadResult) -> None:
    seen = []
    for profile in hw.load_profiles(directory, always_local=settings.PKB_ALWAYS_LOCAL_CPU):
        try:
            seen.append(upsert_hardware(profile).slug)
        except Exception as exc:
            result.errors.append(f"hardware {profile.get('id')}: {type(exc).__name__}: {exc}")
    result.hardware.extend(seen)
    Hardware.objects.exclude(slug__in=seen).update(retired=True)


def load_catalog(package: str, hardware_dir: Path) -> LoadResult:
    result = LoadResult()
    load_hardware(hardware_dir, result)
    load_problems(package, result)
    return result
