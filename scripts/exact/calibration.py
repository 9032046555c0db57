"""The numbers behind the exact-answer rule (docs/evaluator.md, "How correctness is judged").

    .venv/bin/python scripts/exact/calibration.py [--world-sizes 2 4 8]

Runs every summing problem (small preset, default dtype, seed 3) with the variants of
tests/evaluator/lossy_variants.py in one gloo group per world size, judges each with the
evaluator's rule, and prints per world size and variant: how many problems pass, and the ratio
of the variant's rms error to the reference's (both against the exact answer; the largest over a
problem's outputs and ranks), then the all-reduce's errors in full. First, how far honest
bf16 sums in other orders are from a ring's error (the margin RMS_MULTIPLE must leave).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import problems  # noqa: E402
from evaluator.compare import compare_output  # noqa: E402
from tests.evaluator.judging import summing_problems, verdict  # noqa: E402
from tests.evaluator.lossy_variants import TRANSFORMS, run_world  # noqa: E402

VARIANTS = ("copy",) + tuple(TRANSFORMS)


def errors(ranks: list[dict], slug: str, variant: str) -> tuple[float, float, float, float]:
    """(candidate rms, candidate max, reference rms, reference max) of output 0, worst rank."""
    problem = problems.get(slug)
    worst = (0.0, 0.0, 0.0, 0.0)
    for rank in ranks:
        record = rank[slug]
        got = record["native"] if variant == "copy" else record["variants"][variant]
        check = compare_output(0, got[0], record["native"][0], problem.tolerance(problem.default_dtype),
                               record["exact"][0])
        cand, ref = check["candidate_err"], check["reference_err"]
        worst = max(worst, (cand["rms"], cand["max_abs"], ref["rms"], ref["max_abs"]))
    return worst


def other_orders(n: int = 1 << 20) -> None:
    """rms error of bf16 sums in other orders, over a ring's (chunk c starts at rank c + 1)."""
    print("| ranks | ring rms | forward / ring | reverse / ring | pairwise / ring | fp32 / ring |\n|---|---|---|---|---|---|")
    gen = torch.Generator().manual_seed(0)
    for size in (2, 4, 8):
        parts = [torch.randn(n, generator=gen).to(torch.bfloat16) for _ in range(size)]
        exact = torch.stack([p.double() for p in parts]).sum(0)

        def in_order(order: list[int], sl: slice = slice(None)) -> torch.Tensor:
            total = parts[order[0]][sl]
            for i in order[1:]:
                total = total + parts[i][sl]  # bf16: rounded at every hop
            return total.double()

        ring = torch.cat([in_order([(c + 1 + k) % size for k in range(size)], slice(c * n // size, (c + 1) * n // size))
                          for c in range(size)])
        pairs = list(parts)
        while len(pairs) > 1:
            pairs = [pairs[i] + pairs[i + 1] for i in range(0, len(pairs), 2)]
        fp32 = torch.stack([p.float() for p in parts]).sum(0).to(torch.bfloat16).double()

        def rms(t: torch.Tensor) -> float:
            return float((t - exact).square().mean().sqrt())

        base = rms(ring)
        print(f"| {size} | {base:.2e} | {rms(in_order(list(range(size)))) / base:.3f} | "
              f"{rms(in_order(list(range(size))[::-1])) / base:.3f} | {rms(pairs[0].double()) / base:.3f} | "
              f"{rms(fp32) / base:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4, 8])
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    print(f"# {platform.node()} {platform.machine()}, torch {torch.__version__}, commit {commit}")
    other_orders()
    slugs = summing_problems()
    with tempfile.TemporaryDirectory(prefix="pkb-calibration-") as tmp:
        for size in args.world_sizes:
            ranks = run_world(size, slugs, Path(tmp) / f"ws{size}")
            print(f"\n## {size} ranks, {len(slugs)} summing problems")
            print("| variant | pass | rms ratio: smallest | median | failure classes |\n|---|---|---|---|---|")
            for variant in VARIANTS:
                results = [verdict(slug, ranks, variant) for slug in slugs]
                if variant == "bf16":  # lossy only where the reference computes in float32
                    results = [r for r in results if not r.same_as_reference]
                # 0: no output judged against an exact answer moved (the variant failed elsewhere).
                ratios = [r.ratio for r in results if r.ratio > 0]
                classes = sorted(set().union(*(r.failures for r in results)))
                print(f"| {variant} | {sum(r.passed for r in results)}/{len(results)} | {min(ratios):.2f} | "
                      f"{statistics.median(ratios):.2f} | {', '.join(classes) or '-'} |")
            print("\nall-reduce (bf16): | variant | rms | max abs | reference rms | reference max abs |")
            for variant in VARIANTS:
                cand_rms, cand_max, ref_rms, ref_max = errors(ranks, "all-reduce", variant)
                print(f"| {variant} | {cand_rms:.2e} | {cand_max:.2e} | {ref_rms:.2e} | {ref_max:.2e} |")


if __name__ == "__main__":
    main()
