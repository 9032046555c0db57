"""Shared by the run tests: loading real problems, finishing samples with real reports, and
the hand computation of the scores the portal must agree with."""

from __future__ import annotations

import copy
import io
import math
import tarfile
import zipfile
from pathlib import Path
from typing import Any, Iterable

from .conftest import DATA

PKB_DIR = DATA / "pkb" / "solutions_cuda_bf16_h100_8_testlab_pkb-signature-model"
# What the problems' pkb_ids will say for the problems these tests use (problems/ is written
# elsewhere; the importer reads whatever the metadata says).
TEST_PKB_INDEX = {1: ["all-reduce"], 2: ["all-gather"], 3: ["broadcast"], 7: ["reduce-scatter"],
                  8: ["all-to-all"], 16: ["tp-gemm-reducescatter"], 18: ["tp-rmsnorm"],
                  10: ["vocab-parallel-embedding"], 33: ["ulysses-all-to-all"],
                  73: ["vocab-parallel-cross-entropy"]}


CATALOG = ["all-gather", "reduce-scatter", "broadcast", "all-to-all", "tp-rmsnorm",
           "tp-gemm-reducescatter", "vocab-parallel-embedding", "ulysses-all-to-all",
           "vocab-parallel-cross-entropy"]  # with all-reduce: every problem the run tests use


def load_problems(slugs: Iterable[str]) -> None:
    import problems
    from portal.catalog.services import LoadResult, upsert_problem

    for slug in slugs:
        p = problems.get(slug)
        upsert_problem(p, problems.source_text(p), problems.version(p), LoadResult())


def finish(sub: Any, real_report: dict[str, Any], *, correct: bool, speedup: float,
           low: float | None = None, high: float | None = None,
           failure_class: str = "value_mismatch") -> None:
    """Give a submission the real report, with this verdict and speedup (and interval)."""
    from django.utils import timezone

    from portal.submissions.lifecycle import apply_report

    report = copy.deepcopy(real_report)
    report["problem"] = {**report["problem"], "slug": sub.problem.slug,
                         "version": sub.problem_version.version}
    report["timing"]["speedup"] = speedup
    if low is not None:
        report["schema_version"] = "1.3"
        report["timing"]["interval"] = {"low": low, "high": high, "level": 0.95, "method": "test"}
    if not correct:
        report["verdict"] = "fail"
        report["failure"] = {"failure_class": failure_class, "message": "rank 1: it went wrong",
                             "rank": 1, "trial": 0}
    apply_report(sub, report)
    sub.status, sub.finished_at = "finished", timezone.now()
    sub.save()


def pack(files: dict[str, bytes], kind: str = "zip") -> bytes:
    buf = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buf, "w") as zf:
            for name, data in files.items():
                zf.writestr(name, data)
    else:
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def pkb_files(directory: Path = PKB_DIR) -> dict[str, bytes]:
    return {f"{directory.name}/{p.name}": p.read_bytes() for p in sorted(directory.glob("*.py"))}


# --- the hand computation: written from the definitions, not with portal/leaderboards/metrics ---

def hand_pass_at_k(n: int, c: int, k: int) -> float:
    if n < k:
        return 1.0 if c else 0.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def hand_scores(samples: dict[str, list[tuple[bool, float | None, float | None]]], n_problems: int,
                k: int) -> dict[str, Any]:
    """``samples``: problem -> [(correct, speedup, interval low)] of its finished samples."""
    def credited(s: tuple[bool, float | None, float | None]) -> float:
        return s[2] if s[2] is not None else (s[1] or 0.0)

    fast = {}
    for p in (0.0, 0.5, 1.0, 1.5, 2.0):
        solved = 0
        for tries in samples.values():
            good = [credited(s) for s in tries if s[0]]
            solved += bool(good) and (p == 0 or max(good) > p)
        fast[f"{p:g}"] = solved / n_problems
    ks = sorted({1, k})
    pass_at = {str(kk): sum(hand_pass_at_k(len(t), sum(s[0] for s in t), kk)
                            for t in samples.values()) / n_problems for kk in ks}
    fast_at = {str(kk): sum(hand_pass_at_k(len(t), sum(s[0] and credited(s) > 1 for s in t), kk)
                            for t in samples.values()) / n_problems for kk in ks}
    return {"fast_p": fast, "pass_at_k": pass_at, "fast_1_at_k": fast_at}
