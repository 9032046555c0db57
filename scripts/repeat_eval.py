"""Run the same candidate through `pkb eval` N times, each a separate launch, and print the table.

The reproducibility check of docs/timing.md: a score must mean the same thing twice. Each entry is
PROBLEM:FILE, or PROBLEM:reference for an exact copy of the problem's reference (whose speedup
must be 1).

    python3 scripts/repeat_eval.py --runs 5 --world-size 2 --device cuda \
        all-reduce:reference all-gather:reference tp-gemm-reducescatter:reference \
        all-reduce:solutions/symm_mem/all_reduce_one_shot.py --out $OUT/repeat

Prints a markdown table (speedup and 95% interval per run, max/min, wall time) after a
provenance line (date, commit, host, GPUs, torch, NCCL); the reports land in --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def provenance() -> str:
    # A copy of the tree on a device host may carry a stale .git: PKB_COMMIT names the real one.
    commit = os.environ.get("PKB_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip() or "unknown"
    import torch

    gpus = ""
    if torch.cuda.is_available():
        gpus = f", {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
        gpus += f", NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}"
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return f"{when}, commit {commit}, host {platform.node()}{gpus}, torch {torch.__version__}"


def candidate_file(problem: str, what: str, scratch: Path) -> Path:
    if what != "reference":
        return Path(what)
    path = scratch / f"{problem.replace('-', '_')}_reference_copy.py"
    path.write_text(f'"""An exact copy of the {problem} reference: its speedup must be 1."""\n'
                    f"from problems import get as _get\n\nsolution = _get({problem!r}).reference\n")
    return path


def one_run(problem: str, solution: Path, args: argparse.Namespace, report: Path) -> dict:
    command = [sys.executable, "-m", "evaluator.cli", "eval", "--problem", problem, "--solution", str(solution),
               "--world-size", str(args.world_size), "--device", args.device, "--size", args.size,
               "--json", str(report)]
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - started
    if not report.exists():
        return {"wall_s": wall, "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    data = json.loads(report.read_text())
    timing = data.get("timing") or {}
    return {"wall_s": wall, "verdict": data["verdict"], "speedup": timing.get("speedup"),
            "interval": timing.get("interval"), "stop": timing.get("stop"),
            "clocks_moved": (timing.get("clocks") or {}).get("moved"),
            "failure": (data.get("failure") or {}).get("message")}


def row(entry: str, runs: list[dict]) -> str:
    speedups = [r["speedup"] for r in runs if r.get("speedup")]
    cells = []
    for r in runs:
        if r.get("speedup") is None:
            cells.append(f"fail: {r.get('failure') or r.get('error')}")
            continue
        iv, stop = r["interval"], r["stop"]
        moved = " clocks moved" if r.get("clocks_moved") else ""
        cells.append(f"{r['speedup']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}] {stop['reason']} {stop['rounds']}r{moved}")
    spread = f"{max(speedups) / min(speedups):.3f}" if speedups else "-"
    walls = ", ".join(f"{r['wall_s']:.1f}" for r in runs)
    return f"| {entry} | {'<br>'.join(cells)} | {spread} | {walls} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("entries", nargs="+", help="PROBLEM:FILE or PROBLEM:reference")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--size", default="default")
    parser.add_argument("--out", type=Path, default=None, help="folder for the reports (default: a temporary one)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="pkb-repeat-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"# {provenance()}; {args.runs} runs each, world size {args.world_size}, {args.device}, size {args.size}")
    print("| candidate | speedup [95% interval] stop, per run | max/min | wall s per run |")
    print("|---|---|---|---|")
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for entry in args.entries:
            problem, _, what = entry.partition(":")
            solution = candidate_file(problem, what or "reference", Path(scratch))
            runs = [one_run(problem, solution, args, out / f"{problem}-{Path(what).stem}-{i}.json")
                    for i in range(args.runs)]
            results[entry] = runs
            print(row(entry, runs), flush=True)
    (out / "summary.json").write_text(json.dumps({"provenance": provenance(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
