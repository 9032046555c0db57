"""Every ParallelKernelBench problem maps onto this suite, and docs/pkb-mapping.md is current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import problems

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("pkb_mapping", ROOT / "scripts" / "pkb_mapping.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_pkb_problem_maps_once():
    script = _script()
    rows = script.mapping()
    assert [r["id"] for r in rows] == list(range(1, 88))
    assert script.check_mapping(rows) == []


def test_no_two_problems_claim_one_pkb_id():
    claims = [i for p in problems.all_problems() for i in p.pkb_ids]
    assert len(claims) == len(set(claims))


def test_the_problems_written_for_pkb_claim_their_ids():
    script = _script()
    for slug in script.WRITTEN_FOR_PKB:
        assert problems.get(slug).pkb_ids, slug


def test_the_mapping_document_is_current():
    script = _script()
    assert (ROOT / "docs" / "pkb-mapping.md").read_text() == script.render(script.mapping()), \
        "rerun: python scripts/pkb_mapping.py > docs/pkb-mapping.md"
