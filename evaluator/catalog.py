"""Plain-data views of the problem suite: listings, coverage counts and shapes per world size."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

import problems
from problems.spec import CATEGORIES, COLLECTIVES, Problem, dtype_name


def describe_value(value: Any) -> Any:
    """An input as plain data: a tensor's shape and dtype, or a short repr of anything else."""
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return [describe_value(v) for v in value]
    text = repr(value)
    return {"value": text if len(text) <= 200 else text[:200] + "..."}


def shapes(problem: Problem, world_size: int, size: str = "default") -> dict[str, Any]:
    """Rank 0's inputs, built on the meta device (nothing is allocated)."""
    case = problem.case(world_size, size, None, rank=0, seed=0, device="meta")
    return {name: describe_value(value) for name, value in problem.make_inputs(case).items()}


def traffic(problem: Problem, world_size: int, size: str = "default") -> dict[str, float]:
    t = problem.traffic(problem.setting(world_size, size))
    return {"link_bytes": float(t.link_bytes), "hbm_bytes": float(t.hbm_bytes), "flops": float(t.flops)}


def problem_row(problem: Problem) -> dict[str, Any]:
    return {
        "id": problem.id, "slug": problem.slug, "title": problem.title,
        "categories": list(problem.categories), "collectives": list(problem.collectives),
        "source": {"codebase": problem.source.codebase, "function": problem.source.function,
                   "url": problem.source.url},
        "world_sizes": list(problem.world_sizes), "world_size_note": problem.world_size_note,
        "dtypes": [dtype_name(d) for d in problem.dtypes], "tags": list(problem.tags),
        "version": problems.version(problem),
    }


def problem_rows() -> list[dict[str, Any]]:
    return [problem_row(p) for p in problems.all_problems()]


def summary_text(rows: list[dict[str, Any]]) -> str:
    categories = Counter(c for row in rows for c in row["categories"])
    collectives = Counter(c for row in rows for c in row["collectives"])
    codebases = Counter(row["source"]["codebase"] for row in rows)
    tags = Counter(t for row in rows for t in row["tags"])
    lines = [f"{len(rows)} problems", "", "per category (a problem may count in several):"]
    lines += [f"  {name:<12} {categories.get(name, 0):>4}" for name in CATEGORIES]
    lines += ["", "per collective used:"]
    lines += [f"  {name:<15} {collectives.get(name, 0):>4}" for name in COLLECTIVES]
    lines += ["", "per source codebase:"]
    lines += [f"  {name:<24} {count:>4}" for name, count in codebases.most_common()]
    if tags:
        lines += ["", "tags:"] + [f"  {name:<15} {count:>4}" for name, count in tags.most_common()]
    return "\n".join(lines)
