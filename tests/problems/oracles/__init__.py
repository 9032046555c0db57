"""Single-process oracles for problem references, one module per family.

Each module defines ``ORACLES = {slug: (oracle, tolerance)}``. An oracle takes every rank's inputs
(built locally with the same seed the references ran with) and returns every rank's expected
outputs, computed without communication, ideally in float64 from the dense math the problem
shards. ``tests/problems/test_oracles.py`` runs all the references in one rank group and compares.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

import torch

WORLD = 4
Inputs = list[dict[str, torch.Tensor]]
Oracle = Callable[[Inputs], list[list[torch.Tensor]]]


def each(value: Callable[[int], torch.Tensor]) -> list[list[torch.Tensor]]:
    """One output per rank."""
    return [[value(r)] for r in range(WORLD)]


def xs(inputs: Inputs, name: str = "x") -> list[torch.Tensor]:
    """Input ``name`` of every rank, in rank order."""
    return [i[name] for i in inputs]


def _modules() -> list[object]:
    return [importlib.import_module(f"{__name__}.{info.name}") for info in pkgutil.iter_modules(__path__)]


def all_oracles() -> dict[str, tuple[Oracle, float]]:
    found: dict[str, tuple[Oracle, float]] = {}
    for module in _modules():
        for slug, entry in getattr(module, "ORACLES", {}).items():
            assert slug not in found, f"two oracles for {slug}"
            found[slug] = entry
    return found


def all_skipped() -> dict[str, str]:
    """Problems without an oracle, each with the reason."""
    return {slug: why for module in _modules() for slug, why in getattr(module, "SKIPPED", {}).items()}
