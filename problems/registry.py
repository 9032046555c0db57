"""Finds every problem module in the package: adding a problem never edits a central list."""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import pkgutil
from pathlib import Path

from .spec import Problem

_PACKAGE = __name__.rsplit(".", 1)[0]
_ROOT = Path(__file__).resolve().parent
_NOT_PROBLEMS = {"spec", "groups", "registry", "traffic"}


@functools.cache
def all_problems() -> tuple[Problem, ...]:
    found: dict[str, Problem] = {}
    ids: dict[int, str] = {}
    for info in pkgutil.walk_packages([str(_ROOT)], prefix=f"{_PACKAGE}."):
        if info.ispkg or info.name.rsplit(".", 1)[-1] in _NOT_PROBLEMS:
            continue
        problem = getattr(importlib.import_module(info.name), "PROBLEM", None)
        if not isinstance(problem, Problem):
            continue
        if problem.slug in found:
            raise RuntimeError(f"duplicate problem slug {problem.slug!r} in {info.name}")
        if problem.id in ids:
            raise RuntimeError(f"problem id {problem.id} used by {ids[problem.id]} and {problem.slug}")
        found[problem.slug] = problem
        ids[problem.id] = problem.slug
    return tuple(sorted(found.values(), key=lambda p: p.id))


def get(slug: str) -> Problem:
    for problem in all_problems():
        if problem.slug == slug:
            return problem
    known = ", ".join(p.slug for p in all_problems()[:12])
    raise KeyError(f"unknown problem {slug!r}; `pkb problems` lists them (e.g. {known}, ...)")


def source_text(problem: Problem) -> str:
    """The full text of the module that defines the problem (what the portal shows and versions)."""
    module = inspect.getmodule(problem.reference)
    if module is None:
        raise LookupError(f"cannot find the module that defines {problem.slug}")
    return inspect.getsource(module)


def version(problem: Problem) -> str:
    """A content hash of the problem module: a changed reference or shape makes a new version."""
    return hashlib.sha256(source_text(problem).encode()).hexdigest()[:16]
