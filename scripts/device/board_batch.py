"""One batch of the model board: ParallelKernelBench files evaluated through a running portal,
resuming where the saved results stop. Driven by scripts/device/board_batch.sh, which starts
the portal and the workers; this part only talks HTTP (requests) and needs nothing else.

Each directory is first imported as a dry run (what the import accepts, exactly); then each
accepted file not yet in the results is imported on its own (a run of one file, so that the
batch can stop feeding when its time is up) and waited for. At most ``2 * slots`` files are in
the queue at once, and none is started that cannot end inside the budget by the median time
so far. Files go in order of their PKB problem, every model's file of a problem together, so
that a board that is not finished yet compares the models on the same problems. Every finished
file is appended to the results at once (JSON lines: the submission with its report, the file,
its PKB id and source hash), so a batch killed midway keeps what it finished.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

DONE = ("finished", "failed")


@dataclass
class Item:
    directory: Path
    name: str
    pkb_id: int | None
    problem: str | None
    sha256: str
    message: str = ""  # the import's note on the file (e.g. it relies on NVLink multicast)
    submission: int | None = None
    queued: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.directory.name}/{self.name}"


@dataclass
class Portal:
    url: str
    token: str
    session: requests.Session = field(default_factory=requests.Session)

    def __post_init__(self) -> None:
        self.session.headers["Authorization"] = f"Token {self.token}"
        # gunicorn closes idle keep-alive connections after 2 s, the polling interval: a reused
        # one then fails mid-request. One connection per request.
        self.session.headers["Connection"] = "close"

    def pkb_import(self, directory: Path, names: list[str], hardware: str, dry: bool) -> Any:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for name in names:
                tar.add(str(directory / name), arcname=f"{directory.name}/{name}", recursive=False)
        for _ in range(6):
            r = self.session.post(f"{self.url}/api/v1/runs/pkb-import/" + ("?dry_run=1" if dry else ""),
                                  data={"hardware": hardware, "directory": directory.name},
                                  files={"archive": ("d.tar.gz", buf.getvalue())}, timeout=120)
            # 503 means nothing was stored and asks for a retry (a busy database): the batch
            # waits rather than ending with the GPUs idle.
            if r.status_code != 503:
                break
            time.sleep(10)
        if r.status_code not in (200, 201):
            raise RuntimeError(f"import of {directory.name} ({len(names)} files): HTTP {r.status_code}: {r.text[:500]}")
        return r.json()

    def submission(self, pk: int) -> Any:
        return self.session.get(f"{self.url}/api/v1/submissions/{pk}/", timeout=60).json()


def load_results(path: Path) -> dict[str, dict[str, Any]]:
    """Finished files by key (directory/file); a later line for a key replaces an earlier one."""
    found: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                found[row["key"]] = row
    return found


def accepted_files(portal: Portal, dirs: list[Path], hardware: str, limit: int,
                   match: list[str]) -> list[Item]:
    items = []
    for directory in dirs:
        names = sorted(p.name for p in directory.glob("*.py"))
        answer = portal.pkb_import(directory, names, hardware, dry=True)
        for f in answer["files"]:
            if f["status"] == "accepted" and (not match or any(m in f["name"] for m in match)):
                sha = hashlib.sha256((directory / f["name"]).read_bytes()).hexdigest()
                items.append(Item(directory, f["name"], f["pkb_id"], f["problem"], sha,
                                  f.get("message") or ""))
    return items[:limit] if limit else items


def seconds_between(start: str | None, end: str | None) -> float | None:
    from datetime import datetime

    if not start or not end:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def result_row(item: Item, sub: dict[str, Any], provenance: dict[str, Any]) -> dict[str, Any]:
    return {"key": item.key, "directory": item.directory.name, "file": item.name, "pkb_id": item.pkb_id,
            "problem": item.problem, "source_sha256": item.sha256, "import_message": item.message,
            "model": sub.get("model"),
            "status": sub["status"], "verdict": sub.get("verdict"), "failure_class": sub.get("failure_class"),
            "speedup": sub.get("speedup"), "speedup_low": sub.get("speedup_low"),
            "speedup_high": sub.get("speedup_high"), "status_reason": sub.get("status_reason"),
            "seconds": seconds_between(sub.get("started_at"), sub.get("finished_at")),
            "queue_to_verdict_s": round(time.time() - item.queued, 1), **provenance,
            "submission": {k: v for k, v in sub.items() if k != "source"}}


def row_line(row: dict[str, Any]) -> str:
    speedup = f"{row['speedup']:.2f}x" if row.get("speedup") else "-"
    verdict = row.get("verdict") or row["status"]
    why = row.get("failure_class") or ""
    seconds = f"{row['seconds']:.0f}" if row.get("seconds") is not None else "-"
    return f"| {row['directory'].split('_h100_8_')[-1]} | {row['file']} | {row['problem']} | {verdict} {why} | {speedup} | {seconds} |"


def run_batch(args: argparse.Namespace) -> int:
    portal = Portal(args.portal, args.token)
    previous = load_results(args.state)
    results_out = args.out / "board-results.jsonl"
    results_out.write_text("".join(json.dumps(r) + "\n" for r in previous.values()))
    provenance = json.loads(args.provenance)
    dirs = sorted(d for d in args.dirs.glob("solutions_*") if d.is_dir() and "parallelkittens" not in d.name)
    items = accepted_files(portal, dirs, args.hardware, args.limit, [m for m in args.match.split(",") if m])
    todo = [i for i in items if i.key not in previous or previous[i.key]["source_sha256"] != i.sha256]
    todo.sort(key=lambda i: (i.pkb_id if i.pkb_id is not None else 10**9, i.directory.name, i.name))
    print(f"{len(items)} importable files in {len(dirs)} directories; {len(items) - len(todo)} done "
          f"before; {len(todo)} to go; {args.slots} job slot(s); budget ends in "
          f"{args.budget_end - time.time():.0f} s", flush=True)
    builder = start_prebuild(args, todo)
    print("| model | file | problem | verdict | speedup | seconds |\n|---|---|---|---|---|---|", flush=True)
    flying: list[Item] = []
    times: list[float] = []
    new: list[dict[str, Any]] = []
    first = time.time()
    while (todo or flying) and time.time() < args.budget_end:
        estimate = statistics.median(times) if times else args.first_estimate
        while todo and len(flying) < 2 * args.slots:
            waits = 1 + len(flying) // args.slots  # job lengths until this one is done
            if time.time() + waits * estimate > args.budget_end:
                break
            item = todo.pop(0)
            answer = portal.pkb_import(item.directory, [item.name], args.hardware, dry=False)
            item.submission, item.queued = answer["files"][0]["submission"], time.time()
            flying.append(item)
        if not flying:
            break
        time.sleep(2)
        for item in list(flying):
            sub = portal.submission(item.submission)  # type: ignore[arg-type]
            if sub["status"] not in DONE:
                continue
            flying.remove(item)
            row = result_row(item, sub, provenance)
            new.append(row)
            if row["seconds"] is not None:
                times.append(row["seconds"])
            with results_out.open("a") as out:
                out.write(json.dumps(row) + "\n")
            print(row_line(row), flush=True)
    if builder is not None and builder.poll() is None:
        builder.kill()
    elapsed = max(time.time() - first, 1e-9)
    left = len(todo) + len(flying)
    print(f"\nthis batch: {len(new)} verdicts in {elapsed:.0f} s = {len(new) * 3600 / elapsed:.0f} "
          f"verdicts per hour ({args.slots} slot(s)); median {statistics.median(times) if times else 0:.0f} s "
          f"per file; {left} left (of which {len(flying)} were running at the end and are redone next time)")
    summarize(load_results(results_out), len(items), args.out / "board-table.md")
    return 0


def start_prebuild(args: argparse.Namespace, todo: list[Item]) -> subprocess.Popen[bytes] | None:
    """The build stage over the files still to evaluate, in their order, on the CPU cores while
    the GPUs evaluate (worker/prebuild.py); the workers read its cache (PKB_KERNEL_SEED)."""
    if args.prebuild_seed is None or not todo:
        return None
    log = (args.out / "board-prebuild.log").open("ab")
    return subprocess.Popen([sys.executable, "-m", "worker.prebuild", "--seed", str(args.prebuild_seed),
                             "--arch", args.arch, "--jobs", str(args.prebuild_jobs),
                             *[str(i.directory / i.name) for i in todo]],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def summarize(results: dict[str, dict[str, Any]], total: int, path: Path) -> None:
    """Per model: files done, passes, fails by class; and the whole table, to ``path``."""
    by_model: dict[str, list[dict[str, Any]]] = {}
    for row in results.values():
        by_model.setdefault(row["directory"], []).append(row)
    lines = [f"{len(results)} of {total} files have a verdict", "",
             "| directory | done | pass | fail | failed (no verdict) |", "|---|---|---|---|---|"]
    for directory, rows in sorted(by_model.items()):
        passed = sum(r.get("verdict") == "pass" for r in rows)
        failed = sum(r.get("verdict") == "fail" for r in rows)
        lines.append(f"| `{directory}` | {len(rows)} | {passed} | {failed} | {len(rows) - passed - failed} |")
    print("\n".join(lines))
    table = ["| model | file | problem | verdict | speedup | seconds |", "|---|---|---|---|---|---|"]
    table += [row_line(r) for r in sorted(results.values(), key=lambda r: r["key"])]
    path.write_text("\n".join(lines + [""] + table) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--portal", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--hardware", required=True)
    parser.add_argument("--dirs", type=Path, required=True, help="holds solutions_* directories")
    parser.add_argument("--state", type=Path, required=True, help="results of earlier batches (JSON lines)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-end", type=float, required=True, help="epoch seconds")
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="only the first N importable files")
    parser.add_argument("--match", default="", help="only files whose names contain one of these (comma-separated)")
    parser.add_argument("--first-estimate", type=float, default=90.0, help="seconds per file before any is timed")
    parser.add_argument("--provenance", default="{}", help="JSON object added to every result")
    parser.add_argument("--prebuild-seed", type=Path, default=None, help="run the build stage into this cache")
    parser.add_argument("--prebuild-jobs", type=int, default=4)
    parser.add_argument("--arch", default="sm_90")
    return run_batch(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
