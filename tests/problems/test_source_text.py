"""A problem's text (shown in the portal, carried by prompts, hashed into its version) includes
the shared problem-package helpers it imports, so that a reader sees the whole reference and a
change to a helper is a new version of every problem that uses it."""

from __future__ import annotations

import problems
from problems import registry


def test_a_self_contained_problem_is_its_module_alone():
    text = registry.source_text(problems.get("all-reduce"))
    assert "# ---- problems/" not in text
    assert "PROBLEM = Problem(" in text


def test_the_helpers_a_problem_imports_follow_its_module():
    text = registry.source_text(problems.get("vocab-parallel-logprobs-top-k-top-p"))
    assert "# ---- problems/vocab_parallel/sampling_filter.py, imported above ----" in text
    assert "def top_k_top_p(" in text
    # The format and the standard traffic formulas are not repeated in every problem.
    assert "problems/spec.py" not in text and "problems/traffic.py" not in text


def test_helpers_are_followed_transitively_and_once():
    text = registry.source_text(problems.get("graphbolt-feature-exchange-backward"))
    assert text.count("# ---- problems/graph/graphbolt_counts.py") == 1
    assert text.count("# ---- problems/determinism.py") == 1


def test_problems_that_share_a_helper_still_have_their_own_versions():
    one, two = problems.get("zero1-training-step"), problems.get("zero2-training-step")
    assert registry.version(one) != registry.version(two)
    assert "def zero_step(" in registry.source_text(one)
