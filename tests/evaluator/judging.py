"""Verdicts of the exact-answer judge on the variants of ``lossy_variants``, per problem and world size."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

import problems
from evaluator.compare import compare_output

SUMMING = ("all_reduce", "reduce_scatter", "reduce")


def summing_problems() -> list[str]:
    return sorted(p.slug for p in problems.all_problems() if set(p.collectives) & set(SUMMING))


@dataclass
class Verdict:
    passed: bool
    ratio: float  # largest candidate rms / reference rms over the outputs judged against the exact answer
    same_as_reference: bool  # bit for bit: the variant is what the reference computes anyway
    failures: frozenset[str]  # the failure classes of its outputs


def verdict(slug: str, ranks: list[dict[str, Any]], variant: str) -> Verdict:
    problem = problems.get(slug)
    tol = problem.tolerance(problem.default_dtype)
    passed, ratio, same = True, 0.0, True
    failures: set[str] = set()
    for rank in ranks:
        record = rank[slug]
        outputs = record["native"] if variant == "copy" else record["variants"][variant]
        for index, (got, want, exact) in enumerate(zip(outputs, record["native"], record["exact"])):
            same &= got.shape == want.shape and got.dtype == want.dtype and torch.equal(got, want)
            check = compare_output(index, got, want, tol, exact)
            passed &= check["status"] == "ok"
            failures |= {check["status"]} - {"ok"}
            if check["judged_against"] == "exact" and check["candidate_err"] is not None:
                ref = check["reference_err"]["rms"]
                cand = check["candidate_err"]["rms"]
                ratio = max(ratio, cand / ref if ref else (math.inf if cand else 0.0))
    return Verdict(passed, ratio, same, frozenset(failures))
