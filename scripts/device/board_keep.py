"""Keeps a board batch's results: folds the batch's ``board-results.jsonl`` (from the device's
$OUT) into the committed state file of its hardware, so that the next batch resumes after them.

    python3 scripts/device/board_keep.py /work/.device/N/board-results.jsonl \
        --state docs/measurements/board/h100-x2-nvlink-results.jsonl [--repeats logs/FILE.jsonl]

A batch writes the earlier results first, then its own; only lines whose file is not in the state
yet are appended (the state's lines are never rewritten). A line for a file the state already
holds with the same source is a repeat: a batch started from a stale state evaluated it again.
Repeats go to ``--repeats`` (a record of how reproducible a verdict and a speedup are), or are
counted and dropped. Lines of another hardware than the state's are refused, and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def read(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def keep(batch: list[dict[str, Any]], state: list[dict[str, Any]]) -> tuple[list[dict[str, Any]],
                                                                              list[dict[str, Any]]]:
    """(the batch's new lines, its repeats of lines the state has); raises on mixed hardware."""
    known = {row["key"]: row for row in state}
    hardware = {row.get("hardware") for row in state} | {row.get("hardware") for row in batch}
    if len(hardware) > 1:
        raise ValueError(f"lines of more than one hardware ({', '.join(sorted(map(str, hardware)))}): "
                         "each hardware has its own state file")
    new: dict[str, dict[str, Any]] = {}
    repeats = []
    for row in batch:
        old = known.get(row["key"])
        if old is None:
            new[row["key"]] = row  # a later line of the same file (a redo) replaces an earlier one
        elif old.get("submission") != row.get("submission") and old["source_sha256"] == row["source_sha256"]:
            repeats.append(row)
    return list(new.values()), repeats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("batch", type=Path, help="the batch's board-results.jsonl")
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--repeats", type=Path, help="append the batch's repeats here")
    args = parser.parse_args()
    state = read(args.state)
    try:
        new, repeats = keep(read(args.batch), state)
    except ValueError as exc:
        print(f"nothing kept: {exc}", file=sys.stderr)
        return 1
    with args.state.open("a") as out:
        out.writelines(json.dumps(row) + "\n" for row in new)
    if args.repeats and repeats:
        with args.repeats.open("a") as out:
            out.writelines(json.dumps(row) + "\n" for row in repeats)
    kept = "" if args.repeats else " (dropped: pass --repeats to keep them)"
    print(f"{args.state}: {len(state)} + {len(new)} new = {len(state) + len(new)} files; "
          f"{len(repeats)} repeat(s) of files it had{kept if repeats else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
