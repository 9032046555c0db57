"""How much the order within a round moves a report's ratios (docs/timing.md, "The order within a
round moves the ratio"): per timed report, the median ratio of the rounds where the candidate ran
first (even) and where the reference did (odd), the reported speedup, and what the crossover
estimator would give (the geometric mean of each pair of rounds, one of each order; the median
over pairs).

    .venv/bin/python scripts/bench/order_effect.py REPORT.json [MORE.json | reports.tgz ...]

An evaluation report gives one row; a sweep report one row per size. Reads files only.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tarfile
from pathlib import Path
from typing import Any, Iterator, Optional


def parity_medians(ratios: list[float]) -> tuple[Optional[float], Optional[float]]:
    """The median ratio of the even rounds (the candidate first) and of the odd ones."""
    even, odd = ratios[0::2], ratios[1::2]
    return (statistics.median(even) if even else None, statistics.median(odd) if odd else None)


def paired_speedup(ratios: list[float]) -> Optional[float]:
    """The median over pairs of rounds (0 and 1, 2 and 3, ...) of each pair's geometric mean: a
    multiplicative order effect cancels within every pair. None without a whole pair."""
    pairs = [math.sqrt(a * b) for a, b in zip(ratios[0::2], ratios[1::2])]
    return statistics.median(pairs) if pairs else None


def timed(report: dict[str, Any], label: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if "points" in report:  # a sweep: each size's report
        for point in report["points"]:
            if point.get("report"):
                yield from timed(point["report"], f"{label} @{point['message_bytes']:.0f} B")
    elif (report.get("timing") or {}).get("rounds"):
        yield label, report["timing"]


def reports(paths: list[Path]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path in paths:
        if path.suffix in (".tgz", ".gz"):
            with tarfile.open(path) as tar:
                for member in sorted(tar.getmembers(), key=lambda m: m.name):
                    if member.isfile() and member.name.endswith(".json"):
                        data = tar.extractfile(member)
                        if data is not None:
                            yield Path(member.name).name, json.load(data)
        else:
            yield path.name, json.loads(path.read_text())


def row(label: str, timing: dict[str, Any]) -> str:
    ratios = [r["ratio"] for r in timing["rounds"]]
    even, odd = parity_medians(ratios)
    paired = paired_speedup(ratios)

    def fmt(value: Optional[float]) -> str:
        return f"{value:.3f}" if value is not None else "-"

    return f"| {label} | {len(ratios)} | {fmt(even)} | {fmt(odd)} | {fmt(timing['speedup'])} | {fmt(paired)} |"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    args = parser.parse_args(argv)
    print("| report | rounds | even (candidate first) | odd | reported | over pairs |")
    print("|---|---|---|---|---|---|")
    for name, report in reports(args.reports):
        for label, timing in timed(report, name):
            print(row(label, timing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
