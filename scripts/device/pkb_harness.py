"""ParallelKernelBench's own harness on the files our board evaluated: its verdicts beside ours.

For each chosen file of the board's results (docs/measurements/board/<hardware>-results.jsonl),
runs PKB's `run_local.py --mode eval` (its torchrun launches, its inputs, its tolerance) on two
GPUs with the file as the solution of the PKB reference of the same name, and writes one JSON line
per file: PKB's per-trial results and speedups, and our verdict and speedup from the board line.
Files whose number differs from the reference's at PKB's commit (the model outputs were numbered
against an older reference list) are staged under the reference's name; a file whose name matches
no reference is reported as such and not run.

    python3 scripts/device/pkb_harness.py --pkb-src .pkb-harness --dirs .pkb-dirs \
        --results docs/measurements/board/h200-x2-nvlink-results.jsonl --limit 10 --out $OUT

--pkb-src holds PKB's run_local.py, utils/, scripts/ and reference/ at the commit the board's
files come from (`git archive dab0830 run_local.py utils scripts reference | tar -x -C .pkb-harness`).
`--table RESULTS.jsonl` prints the side-by-side table of a run (markdown). PKB's harness
launches torchrun once per side and trial (about 15-20 s each on 2 x H100): give it --timeout
240 for 5 trials, or fewer --trials; a file stopped by the timeout keeps the trials it finished.
Lanes: one per pair of GPUs (two on a 4-GPU host), each a queue of files; --budget stops
starting files that could not finish. NVLink multicast stays off in every process.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
SPEEDUP = re.compile(r"trial (\d+): (match|mismatch).*?speedup ([0-9.]+)x")
BACKENDS = ("cuda", "triton")


def name_of(stem: str) -> str:
    """``35_ulysses_all_gather_into_tensor_primitive`` -> ``ulysses_all_gather_into_tensor_primitive``."""
    return stem.split("_", 1)[1] if "_" in stem and stem.split("_", 1)[0].isdigit() else stem


def reference_stem(pkb_src: Path, file: str) -> Optional[tuple[str, str]]:
    """(the PKB reference stem this file answers, its backend); None when no reference has its name."""
    stem = file.removesuffix(".py")
    backend = next((b for b in BACKENDS if stem.endswith(f"_{b}")), None)
    if backend is None:
        return None
    stem = stem.removesuffix(f"_{backend}")
    if (pkb_src / "reference" / f"{stem}.py").is_file():
        return stem, backend
    same = sorted(p.stem for p in (pkb_src / "reference").glob("*.py") if name_of(p.stem) == name_of(stem))
    return (same[0], backend) if len(same) == 1 else None


TRIAL = re.compile(r"trial (\d+): (match|mismatch)[^\n]*")


def as_text(output: Any) -> str:
    """A timed-out run's captured output: bytes, or (in results written before this was
    decoded) the ``str()`` of those bytes."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    text = str(output or "")
    if text.startswith(("b'", 'b"')):
        try:
            return ast.literal_eval(text).decode(errors="replace")
        except (ValueError, SyntaxError):
            return text
    return text


def partial_trials(stdout: str) -> list[dict[str, Any]]:
    """The trials PKB's harness finished before it was stopped, from its per-trial lines."""
    trials = []
    for line in TRIAL.finditer(stdout):
        speed = SPEEDUP.search(line.group(0))
        trials.append({"trial": int(line.group(1)), "result": line.group(2),
                       "speedup": float(speed.group(3)) if speed else None})
    return trials


def parse(stdout: str) -> dict[str, Any]:
    payload: dict[str, Any] = {}
    for line in stdout.splitlines():
        if line.startswith("PKB_EVAL_JSON:"):
            try:
                payload = json.loads(line.removeprefix("PKB_EVAL_JSON:"))
            except ValueError:
                pass
    trials = [{"trial": t.get("trial"), "result": t.get("result")} for t in payload.get("trials", [])
              if isinstance(t, dict)]
    speedups = {int(m.group(1)): float(m.group(3)) for m in SPEEDUP.finditer(stdout)}
    for t in trials:
        t["speedup"] = speedups.get(t["trial"]) if isinstance(t["trial"], int) else None
    return {"all_ok": payload.get("all_ok"), "trials": trials,
            "harness_environment_failed": payload.get("harness_environment_failed")}


def run_one(row: dict[str, Any], args: argparse.Namespace, gpus: str, bin_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"key": row["key"], "file": row["file"], "directory": row["directory"],
                           "problem": row["problem"], "ours": {k: row.get(k) for k in (
                               "verdict", "failure_class", "speedup", "speedup_low", "speedup_high")}}
    found = reference_stem(args.pkb_src, row["file"])
    if found is None:
        return {**out, "pkb": {"skipped": "no PKB reference of this file's name"}}
    stem, backend = found
    stage = Path(tempfile.mkdtemp(prefix="pkb-stage-"))
    shutil.copy(args.dirs / row["directory"] / row["file"], stage / f"{stem}_{backend}.py")
    command = [sys.executable, "run_local.py", "--nproc-per-node", "2", "--mode", "eval", "--problem", stem,
               "--solution", backend, "--solutions-dir", str(stage), "--dtype", args.dtype, "--atol",
               str(args.tol), "--rtol", str(args.tol), "--trials", str(args.trials), "--measure-perf",
               "--logs-dir", str(stage / "logs")]
    env = {**os.environ, **NO_MULTICAST, "CUDA_VISIBLE_DEVICES": gpus, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "PYTHONUNBUFFERED": "1"}
    began = time.monotonic()
    try:
        done = subprocess.run(command, cwd=args.pkb_src, env=env, capture_output=True, text=True,
                              timeout=args.timeout, start_new_session=True)
        result = {**parse(done.stdout), "exit": done.returncode, "stderr_tail": done.stderr[-1500:]}
    except subprocess.TimeoutExpired as exc:
        text = as_text(exc.stdout)
        result = {"timeout_s": args.timeout, "trials": partial_trials(text), "stdout_tail": text[-1500:]}
    shutil.rmtree(stage, ignore_errors=True)
    return {**out, "pkb": {"reference": stem, "backend": backend, "seconds": round(time.monotonic() - began, 1),
                           "command": " ".join(command[1:]), **result}}


def pkb_outcome(pkb: dict[str, Any], trials: int) -> tuple[str, Optional[bool]]:
    """PKB's harness in words, and whether it says the file is correct (None: it cannot tell)."""
    if pkb.get("skipped"):
        return pkb["skipped"], None
    done = pkb.get("trials") or partial_trials(as_text(pkb.get("stdout_tail")))
    matched = [t for t in done if t.get("result") == "match"]
    speed = [t["speedup"] for t in matched if t.get("speedup")]
    speeds = f", speedup {min(speed):.2f}-{max(speed):.2f}x" if speed else ""
    if "timeout_s" in pkb:
        if len(matched) < len(done):
            return f"mismatch in trial {next(t['trial'] for t in done if t.get('result') != 'match')}", False
        if not done:
            return f"no trial finished in {pkb['timeout_s']:.0f} s", None
        return f"{len(done)} of {trials} trials match in {pkb['timeout_s']:.0f} s (stopped){speeds}", True
    if pkb.get("all_ok"):
        return f"all {len(done)} trials match{speeds}", True
    if pkb.get("exit") not in (0, None) and not done:
        return f"failed (exit {pkb['exit']}, no trial)", False
    failed = [t for t in done if t.get("result") != "match"]
    if failed and failed[0].get("result") == "no_artifacts":  # its ranks died before writing outputs
        return f"fails: the solution's ranks exit with an error in trial {failed[0]['trial']}", False
    return f"{len(matched)} of {len(done)} trials match", False


def trials_asked(pkb: dict[str, Any]) -> int:
    """The --trials the file was run with, from its recorded command (5: PKB's default)."""
    found = re.search(r"--trials (\d+)", pkb.get("command", ""))
    return int(found.group(1)) if found else 5


def table(path: Path) -> str:
    """The side-by-side table (markdown) of a run's ``pkb-harness.jsonl``."""
    lines = ["| model | file | ours | PKB's harness | agree |", "|---|---|---|---|---|"]
    for row in (json.loads(line) for line in path.read_text().splitlines() if line.strip()):
        ours = row["ours"]
        if ours.get("verdict") == "pass":
            verdict = f"pass {ours['speedup']:.2f}x [{ours['speedup_low']:.2f}, {ours['speedup_high']:.2f}]"
        else:
            verdict = f"fail {ours.get('failure_class') or ''}".strip()
        said, correct = pkb_outcome(row["pkb"], trials_asked(row["pkb"]))
        agree = "-" if correct is None else ("yes" if correct == (ours.get("verdict") == "pass") else "**no**")
        model = row["directory"].split("_h100_8_")[-1] + (" (Triton)" if "triton" in row["directory"] else "")
        lines.append(f"| {model} | {row['file']} | {verdict} | {said} | {agree} |")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--table":
        print(table(Path(sys.argv[2])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pkb-src", type=Path, required=True)
    parser.add_argument("--dirs", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/pkb-out")))
    parser.add_argument("--match", default="", help="only files whose names contain one of these (A,B)")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--budget", type=float, default=520, help="seconds; no file starts after budget - timeout/2")
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--tol", type=float, default=1e-2, help="atol and rtol")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--gpus", default="", help="GPUs to pair into lanes, e.g. 2,3 (default: all)")
    parser.add_argument("--skip", type=Path, action="append", default=[],
                        help="an earlier run's pkb-harness.jsonl: its files are not run again")
    args = parser.parse_args()
    args.pkb_src = args.pkb_src.resolve()
    args.dirs = args.dirs.resolve()
    started = time.monotonic()
    rows = [json.loads(line) for line in args.results.read_text().splitlines() if line.strip()]
    wanted = [m for m in args.match.split(",") if m]
    done = {json.loads(line)["key"] for path in args.skip for line in path.read_text().splitlines() if line.strip()}
    rows = [r for r in rows if (not wanted or any(m in r["file"] for m in wanted)) and r["key"] not in done]
    rows = rows[: args.limit]
    if args.gpus:
        ids = args.gpus.split(",")
    else:
        count = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU ")
        ids = [str(i) for i in range(count)]
    lanes = [",".join(ids[i:i + 2]) for i in range(0, max(2, len(ids)) - 1, 2)]
    bin_dir = Path(tempfile.mkdtemp(prefix="pkb-bin-"))
    (bin_dir / "torchrun").write_text(f"#!/bin/sh\nexec {sys.executable} -m torch.distributed.run \"$@\"\n")
    (bin_dir / "torchrun").chmod(0o755)
    todo: "queue.Queue[dict[str, Any]]" = queue.Queue()
    for row in rows:
        todo.put(row)
    args.out.mkdir(parents=True, exist_ok=True)
    results_path = args.out / "pkb-harness.jsonl"
    lock = threading.Lock()

    def lane(gpu_pair: str) -> None:
        while time.monotonic() - started < args.budget - args.timeout / 2:
            try:
                row = todo.get_nowait()
            except queue.Empty:
                return
            result = run_one(row, args, gpu_pair, bin_dir)
            with lock:
                with results_path.open("a") as handle:
                    handle.write(json.dumps(result) + "\n")
                pkb = result["pkb"]
                print(f"{row['file'][:52]:52s} ours {row['verdict']:4s} {row.get('speedup') or 0:5.2f}x | PKB "
                      f"{pkb.get('skipped') or ('all trials match' if pkb.get('all_ok') else 'mismatch/failed')} "
                      f"{[t.get('speedup') for t in pkb.get('trials', [])]} {pkb.get('seconds', '')} s", flush=True)

    print(f"== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} PKB harness on {len(rows)} files, "
          f"lanes {lanes}, dtype {args.dtype}, atol=rtol={args.tol}, {args.trials} trials", flush=True)
    threads = [threading.Thread(target=lane, args=(pair,)) for pair in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    left = todo.qsize()
    print(f"done in {time.monotonic() - started:.0f} s; {left} file(s) not started (budget)")


if __name__ == "__main__":
    main()
