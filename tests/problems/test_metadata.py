"""Every problem carries what the harness, the portal and a reader need, and nothing is missing."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import torch

import problems
from problems.spec import CATEGORIES, COLLECTIVES, Traffic

ALL = problems.all_problems()
IDS = [p.slug for p in ALL]
FAMILY_BLOCKS = {"collectives": 1, "data_parallel": 2, "fsdp_zero": 3, "tensor_parallel": 4,
                 "sequence_parallel": 5, "vocab_parallel": 6, "context_parallel": 7, "pipeline": 8,
                 "inference": 9, "expert_parallel": 10, "graph": 11, "spatial": 12, "other": 13}


@pytest.mark.parametrize("problem", ALL, ids=IDS)
def test_it_has_complete_metadata(problem):
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", problem.slug)
    assert problem.title.strip()
    assert len(problem.description.split()) >= 40, "describe what the real code does and why its communication matters"
    assert problem.categories and set(problem.categories) <= set(CATEGORIES)
    assert problem.collectives and set(problem.collectives) <= set(COLLECTIVES)
    assert problem.source.codebase.strip()
    assert ":" in problem.source.function or "." in problem.source.function, "name the file and function"
    assert problem.source.url.startswith("https://")
    assert set(problem.sizes) >= {"small", "default"}
    assert set(problem.world_sizes) <= {2, 4, 8} and problem.world_sizes
    if set(problem.world_sizes) != {2, 4, 8}:
        assert problem.world_size_note, "say why a world size is not supported"


@pytest.mark.parametrize("problem", ALL, ids=IDS)
def test_it_has_a_tolerance_for_every_dtype(problem):
    for dtype in problem.dtypes:
        tol = problem.tolerance(dtype)
        assert 0 <= tol.atol < 1 and 0 <= tol.rtol < 1


@pytest.mark.parametrize("problem", ALL, ids=IDS)
def test_its_family_folder_matches_its_id_block(problem):
    family = problem.reference.__module__.split(".")[1]
    assert problem.id // 100 == FAMILY_BLOCKS[family]


@pytest.mark.parametrize("problem", ALL, ids=IDS)
def test_it_builds_inputs_and_roofline_traffic_at_every_world_size(problem):
    for world_size in problem.world_sizes:
        for size in ("small", "default"):
            traffic = problem.traffic(problem.setting(world_size, size))
            assert isinstance(traffic, Traffic)
            assert traffic.link_bytes > 0 and traffic.hbm_bytes > 0 and traffic.flops >= 0
            for rank in {0, world_size - 1}:
                case = problem.case(world_size, size, None, rank=rank, seed=0, device="meta")
                inputs = problem.make_inputs(case)
                assert any(isinstance(v, torch.Tensor) for v in inputs.values())
                assert set(inputs) | set(problem.process_groups(world_size)) == set(
                    problems.registry.inspect.signature(problem.reference).parameters)


@pytest.mark.parametrize("problem", ALL, ids=IDS)
def test_its_default_inputs_fit_an_h200(problem):
    world_size = max(problem.world_sizes)
    case = problem.case(world_size, "default", None, rank=0, seed=0, device="meta")
    nbytes = sum(v.numel() * v.element_size() for v in problem.make_inputs(case).values()
                 if isinstance(v, torch.Tensor))
    assert nbytes <= 4 * 2**30


def test_ids_and_slugs_are_unique():
    assert len({p.id for p in ALL}) == len(ALL)
    assert len({p.slug for p in ALL}) == len(ALL)


MINIMUM_COVERAGE = {"collective": 8, "tensor": 14, "sequence": 4, "context": 12, "pipeline": 3,
                    "data": 8, "expert": 12, "fsdp_zero": 10, "vocab": 6, "graph": 6, "spatial": 8,
                    "other": 9}


def test_the_suite_covers_the_whole_taxonomy():
    counts = Counter(c for p in ALL for c in p.categories)
    assert len(ALL) >= 100
    short = {c: (counts[c], n) for c, n in MINIMUM_COVERAGE.items() if counts[c] < n}
    assert not short, f"categories below their minimum (have, need): {short}"


def test_the_suite_covers_backward_and_inference():
    tags = Counter(t for p in ALL for t in p.tags)
    assert tags["backward"] >= 5
    assert tags["inference"] >= 5 and tags["latency"] >= 3


def test_metadata_lines_leave_the_version_alone():
    """pkb_ids and sweep describe a problem; they do not change what it computes. Each must sit
    on one line so that versioning can leave it out (problems.registry.METADATA_LINE)."""
    import ast

    from problems.registry import versioned_text

    for problem in ALL:
        tree = ast.parse(versioned_text(problem))
        keywords = {k.arg for node in ast.walk(tree) if isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) == "Problem" for k in node.keywords}
        assert not keywords & {"pkb_ids", "sweep"}, f"{problem.slug}: write pkb_ids= and sweep= on one line each"


def test_committed_results_still_match_their_problems_versions():
    # The leaderboard is seeded from these reports: a metadata edit must not orphan them.
    import json
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "docs" / "results"
    checked = 0
    for path in sorted(results.rglob("*.json")):
        for report in json.loads(path.read_text()).get("reports", []):
            if "problem" in report:  # an evaluation report (sweeps are checked through theirs)
                problem = problems.get(report["problem"]["slug"])
                assert report["problem"]["version"] == problems.version(problem), path.name
                checked += 1
    assert checked >= 3
