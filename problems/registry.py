"""Finds every problem module in the package: adding a problem never edits a central list."""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.util
import inspect
import pkgutil
import re
from pathlib import Path

from .spec import Problem

_PACKAGE = __name__.rsplit(".", 1)[0]
_ROOT = Path(__file__).resolve().parent
_NOT_PROBLEMS = {"spec", "groups", "registry", "traffic", "determinism"}


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


# Modules every problem may import without them becoming part of its text: the format itself,
# the standard traffic formulas and group layouts, and the sweep axes (metadata: METADATA_LINE).
_INFRASTRUCTURE = {f"{_PACKAGE}.{name}" for name in ("spec", "groups", "registry", "traffic", "sweeps")}


def _helper_modules(module_name: str, seen: list[str]) -> list[str]:
    """The problem-package modules ``module_name`` imports (transitively), infrastructure aside,
    in first-import order."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module_name)))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == _PACKAGE:
                names = [f"{_PACKAGE}.{alias.name}" for alias in node.names]
            elif node.module.startswith(_PACKAGE + "."):
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith(_PACKAGE + ".")]
        for name in names:
            if name in _INFRASTRUCTURE or name in seen or importlib.util.find_spec(name) is None:
                continue
            seen.append(name)
            _helper_modules(name, seen)
    return seen


def source_text(problem: Problem) -> str:
    """The full text of the module that defines the problem, followed by the text of the
    problem-package helpers it imports (what the portal shows, a prompt carries and the version
    hashes: a change to a shared helper is a change to every problem that uses it)."""
    module = inspect.getmodule(problem.reference)
    if module is None:
        raise LookupError(f"cannot find the module that defines {problem.slug}")
    text = inspect.getsource(module)
    for name in _helper_modules(module.__name__, []):
        path = name.replace(".", "/") + ".py"
        text += f"\n\n# ---- {path}, imported above ----\n\n" + inspect.getsource(
            importlib.import_module(name))
    return text


# Lines that describe a problem without changing what it computes or how it is judged: which
# ParallelKernelBench problems it is the equivalent of, and its message-size sweep axis. A version
# outlives them being added or edited (each sits on one line: tests/problems/test_metadata.py).
METADATA_LINE = re.compile(r"^\s+(pkb_ids|sweep)=.*,\s*$|^from problems\.sweeps import [\w, ]+\s*$")


def versioned_text(problem: Problem) -> str:
    """The module's text less its metadata-only lines: what a version is the hash of."""
    return "".join(line for line in source_text(problem).splitlines(True) if not METADATA_LINE.match(line))


def version(problem: Problem) -> str:
    """A content hash of the problem module: a changed reference or shape makes a new version."""
    return hashlib.sha256(versioned_text(problem).encode()).hexdigest()[:16]
