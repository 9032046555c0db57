"""How much the order within a round moves a report's ratios (docs/timing.md, "The order within a
round moves the ratio"): per timed report, the median ratio of the rounds where the candidate ran
first (even) and where the reference did (odd), the reported speedup, and what the crossover
estimator would give (the geometric mean of each pair of rounds, one of each order; the median
over pairs).

    .venv/bin/python scripts/bench/order_effect.py REPORT.json [MORE.json | reports.tgz ...]

An evaluation report gives one row; a sweep report one row per size. Reads files only.

    .venv/bin/python scripts/bench/order_effect.py --repeat FIRST.jsonl SECOND.jsonl

compares two board batches over the same files (scripts/device/board_batch.py's results): per file
timed in both, each estimator's two readings and their max/min, so whether the crossover estimator
would make two runs agree better.
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


def board_timings(path: Path) -> dict[str, dict[str, Any]]:
    """A board results file's timed reports by file key (a later line for a key replaces an earlier one)."""
    found: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        result = json.loads(line)
        timing = (((result.get("submission") or {}).get("report") or {}).get("timing") or {})
        if timing.get("rounds") and timing.get("speedup"):
            found[result["key"]] = timing
    return found


def repeat_rows(first: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]]) -> list[tuple[str, float, float, float, float]]:
    """Per file timed in both: (key, reported first, reported second, over pairs first, second)."""
    rows = []
    for key in sorted(set(first) & set(second)):
        pairs = [paired_speedup([r["ratio"] for r in timing["rounds"]]) for timing in (first[key], second[key])]
        if None not in pairs:
            rows.append((key, first[key]["speedup"], second[key]["speedup"], pairs[0], pairs[1]))
    return rows


def spread(a: float, b: float) -> float:
    return max(a, b) / min(a, b)


def print_repeat(first: Path, second: Path) -> None:
    rows = repeat_rows(board_timings(first), board_timings(second))
    print("| file | reported | max/min | over pairs | max/min |")
    print("|---|---|---|---|---|")
    for key, r1, r2, p1, p2 in rows:
        print(f"| {key} | {r1:.3f}, {r2:.3f} | {spread(r1, r2):.3f} | {p1:.3f}, {p2:.3f} | {spread(p1, p2):.3f} |")
    if rows:
        for name, columns in (("reported", (1, 2)), ("over pairs", (3, 4))):
            spreads = [spread(row[columns[0]], row[columns[1]]) for row in rows]  # type: ignore[index]
            print(f"\n{name}: max/min over {len(rows)} files, median {statistics.median(spreads):.3f}, "
                  f"largest {max(spreads):.3f}", end="")
        print()


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
    parser.add_argument("--repeat", action="store_true",
                        help="the two paths are board results files of the same files (see above)")
    args = parser.parse_args(argv)
    if args.repeat:
        if len(args.reports) != 2:
            parser.error("--repeat takes exactly two board results files")
        print_repeat(*args.reports)
        return 0
    print("| report | rounds | even (candidate first) | odd | reported | over pairs |")
    print("|---|---|---|---|---|---|")
    for name, report in reports(args.reports):
        for label, timing in timed(report, name):
            print(row(label, timing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
