"""Write docs/kernels.md from the reports of scripts/device/kernels_batch.sh runs.

    python3 scripts/device/kernels_doc.py REPORTS [REPORTS ...] [--out docs/kernels.md]

REPORTS: a kernels-reports.tgz the batch left under $OUT, or a folder of its eval-*.json and
sweep-*.json. Several may be given (an x2 and an x4 call, or calls with FROM=); for the same
kernel, problem and world size the newest timed report wins (a MODE=check report only where
there is no timed one). Every number on the page comes from
a report, with the date it ran and the command that reruns it; this script invents none.
"""

from __future__ import annotations

import argparse
import json
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Iterator

from kernels_table import kernel_name
from sweep_outcomes import NOT_RUN, size_outcome, sizes_in_words, sweep_verdict, why_not_run

ROOT = Path(__file__).resolve().parents[2]
LIBRARY_NOTE = "library code (PyTorch), a baseline row"


def reports(sources: list[Path]) -> Iterator[tuple[Path, dict[str, Any]]]:
    for source in sources:
        if source.is_dir():
            paths = sorted(source.rglob("*.json"))
            for path in paths:
                yield path, json.loads(path.read_text())
        else:
            with tempfile.TemporaryDirectory() as tmp, tarfile.open(source) as tar:
                tar.extractall(tmp, filter="data")
                for path in sorted(Path(tmp).rglob("*.json")):
                    yield Path(path.name), json.loads(path.read_text())


def solution_file(name: str) -> str:
    """The committed file a report's kernel name comes from (variants name their base file)."""
    for candidate in sorted((ROOT / "solutions").rglob("*.py")):
        if candidate.stem == name or name.startswith(candidate.stem + "_"):
            return str(candidate.relative_to(ROOT))
    return f"{name}.py"


def newest(found: dict, key: tuple, report: dict[str, Any]) -> None:
    """Keep the newest report, a timed one over a correctness-only one (MODE=check)."""
    def rank(rep: dict[str, Any]) -> tuple[bool, str]:
        return (bool(rep.get("timing") or rep.get("points")), rep["started_at"])

    if key not in found or rank(found[key]) < rank(report):
        found[key] = report


def fmt_interval(interval: dict[str, Any] | None) -> str:
    if not interval or interval.get("low") is None:
        return "no interval"
    return f"[{interval['low']:.3f}, {interval['high']:.3f}]"


def fmt_pct(value: float | None) -> str:
    return f"{100 * value:.0f}%" if value is not None else "-"


def eval_table(evals: dict) -> list[str]:
    lines = ["| problem | kernel | ranks | speedup [95%] | roofline: kernel / NCCL | verdict | ran | profile | command |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (slug, name, ws), rep in sorted(evals.items()):
        timing = rep.get("timing") or {}
        failure = rep.get("failure") or {}
        verdict = rep["verdict"] + (f" ({failure['failure_class']})" if failure else "")
        speed = f"{timing['speedup']:.3f} {fmt_interval(timing.get('interval'))}" if timing else "-"
        roof = (f"{fmt_pct(timing['candidate'].get('roofline_fraction'))} / "
                f"{fmt_pct(timing['reference'].get('roofline_fraction'))}") if timing else "-"
        file = solution_file(name)
        lib = " (library)" if file.startswith("solutions/library/") else ""
        command = (f"`pkb eval --problem {slug} --solution {file} --world-size {ws} "
                   f"--device {rep['setting']['device']} --size {rep['setting']['size']}`")
        lines.append(f"| {slug} | {name}{lib} | {ws} | {speed} | {roof} | {verdict} | "
                     f"{rep['started_at'][:16]} | {rep.get('hardware_profile')} | {command} |")
    return lines


def untimed_cell(point: dict[str, Any]) -> str:
    """The verdict cell of a size without timing: a size not run says why, apart from a failure."""
    if size_outcome(point) == NOT_RUN:
        return f"{NOT_RUN}: {point.get('skipped') or 'no reason given'}"
    failure_class = (point.get("failure") or {}).get("failure_class")
    return f"{point['verdict']} ({failure_class})" if failure_class else str(point["verdict"])


def sweep_section(slug: str, name: str, ws: int, rep: dict[str, Any]) -> list[str]:
    counts = sizes_in_words(rep)
    lines = [f"### {slug}: {name}, {ws} ranks",
             "",
             f"{rep['setting']['dtype']}, hardware profile {rep.get('hardware_profile')}, ran "
             f"{rep['started_at'][:16]}, verdict {sweep_verdict(rep)}"
             f"{f' ({counts})' if counts else ''}. Command: `{rep.get('command')}`",
             "",
             "| message | NCCL busbw GB/s | kernel busbw GB/s | roofline busbw GB/s | speedup [95%] | kernel / roofline | verdict |",
             "|---|---|---|---|---|---|---|"]
    for point in rep["points"]:
        size = point["message_bytes"]
        label = f"{size / 2**20:g} MiB" if size >= 2**20 else f"{size / 1024:g} KiB"
        timing = point.get("timing")
        if size_outcome(point) == NOT_RUN or not timing:
            lines.append(f"| {label} | | | | | | {untimed_cell(point)} |")
            continue

        def gbps(key: str) -> str:
            # three significant figures: small messages move a few MB/s, not 0.0 GB/s
            return f"{timing[key]:.3g}" if timing.get(key) is not None else "-"

        lines.append(f"| {label} | {gbps('reference_busbw_gbps')} | {gbps('candidate_busbw_gbps')} | "
                     f"{gbps('roofline_busbw_gbps')} | {timing['speedup']:.3f} "
                     f"{fmt_interval(timing.get('interval'))} | "
                     f"{fmt_pct(timing.get('candidate_roofline_fraction'))} | {point['verdict']} |")
    return lines + [""]


# Issue 23's targets: (what, problems, measure, bound). A row per world size with reports, from
# the best hand-written kernel (library rows are baselines, not entries).
TARGETS = [
    ("all-reduce at the default size: roofline fraction", ("all-reduce",), "roofline", 0.80),
    ("all-gather at the default size: roofline fraction", ("all-gather",), "roofline", 0.85),
    ("reduce-scatter at the default size: roofline fraction", ("reduce-scatter",), "roofline", 0.85),
    ("all-reduce at 256 KiB and below: the least speedup over the sizes swept", ("all-reduce",), "small", 2.0),
    ("tensor-parallel all-gather + GEMM, overlapped, at the default size: speedup",
     ("tp-allgather-gemm", "tp-fused-allgather-matmul"), "speedup", 1.1),
    ("tensor-parallel GEMM + reduce-scatter, overlapped, at the default size: speedup",
     ("tp-gemm-reducescatter", "tp-fused-matmul-reducescatter"), "speedup", 1.1),
]


def _measure(kind: str, rep: dict[str, Any]) -> float | None:
    if kind == "small":
        speedups = [p["timing"]["speedup"] for p in rep.get("points", [])
                    if p.get("timing") and p["message_bytes"] <= 256 * 1024 and p["verdict"] == "pass"]
        return min(speedups) if speedups else None
    timing = rep.get("timing") if rep.get("verdict") == "pass" else None
    if not timing:
        return None
    return timing["candidate"].get("roofline_fraction") if kind == "roofline" else timing["speedup"]


def targets_section(evals: dict, sweeps: dict) -> list[str]:
    """Each target of issue 23 against the best hand-written kernel measured for it."""
    lines = ["## Against the targets", "",
             "The best hand-written kernel per target and world size (library rows are baselines); "
             "a target is met only by a measured report.", "",
             "| target | ranks | best kernel | measured | met |", "|---|---|---|---|---|"]
    for what, slugs, kind, bound in TARGETS:
        found = sweeps if kind == "small" else evals
        for ws in sorted({key[2] for key in found}):
            best: tuple[float, str] | None = None
            for (slug, name, size), rep in found.items():
                if size != ws or slug not in slugs or solution_file(name).startswith("solutions/library/"):
                    continue
                value = _measure(kind, rep)
                if value is not None and (best is None or value > best[0]):
                    best = (value, f"{name} ({slug})" if len(slugs) > 1 else name)
            if best is None:
                lines.append(f"| {what} (target {bound:g}) | {ws} | - | not measured | - |")
                continue
            shown = fmt_pct(best[0]) if kind == "roofline" else f"{best[0]:.3f}x"
            target = fmt_pct(bound) if kind == "roofline" else f"{bound:g}x"
            lines.append(f"| {what} (target {target}) | {ws} | {best[1]} | {shown} | "
                         f"{'yes' if best[0] >= bound else 'no'} |")
    return lines + [""]


def fixed_cost_section(sweeps: dict) -> list[str]:
    """Per sweep: how much of the large messages' roofline gap is the fixed cost of a call."""
    rows = []
    for (slug, name, ws), rep in sorted(sweeps.items()):
        timed = sorted((p["message_bytes"], p["timing"]) for p in rep.get("points", [])
                       if p.get("timing") and p["verdict"] == "pass")
        if len(timed) < 2 or timed[0][0] > 64 * 1024:
            continue
        smallest = timed[0][1]
        for size, timing in timed[1:]:
            if size < 64 * 2**20:
                continue
            cells = []
            for side in ("candidate", "reference"):
                whole, fixed = timing[f"{side}_ms"], smallest[f"{side}_ms"]
                cells += [f"{fixed:.3f}", f"{whole:.3f}", fmt_pct(timing["roofline_ms"] / whole),
                          fmt_pct(timing["roofline_ms"] / (whole - fixed)) if whole > fixed else "-"]
            rows.append(f"| {slug}: {name} | {ws} | {size / 2**20:g} MiB | " + " | ".join(cells) + " |")
    if not rows:
        return []
    return ["## What the fixed cost of a call takes at large messages", "",
            "A judged call has a fixed cost whatever its size: the launch, the ranks' meeting before it and "
            "the wait after it (docs/sweeps.md). The smallest size swept shows it (its transfer is a few "
            "microseconds); subtracting it from a large message's time says how close the transfer itself "
            "comes to the roofline. That is an upper estimate for reading the gap, never a score: part of a "
            "small call's time (a protocol's own latency, NCCL's most of all) overlaps the transfer in a large "
            "one, and the reports' roofline fractions above are the measured ones.", "",
            "| sweep | ranks | message | kernel at the smallest size, ms | kernel, ms | kernel / roofline | "
            "kernel / roofline, fixed cost taken off | NCCL at the smallest size, ms | NCCL, ms | NCCL / roofline | "
            "NCCL / roofline, fixed cost taken off |",
            "|---|---|---|---|---|---|---|---|---|---|---|"] + rows + [""]


def planned() -> list[tuple[int, str, str, str]]:
    """(world size, kind, problem, file) of every line of kernels_batch.sh's plan."""
    text = (ROOT / "scripts" / "device" / "kernels_batch.sh").read_text()
    plan = text.split('PLAN="', 1)[1].split('"', 1)[0]
    lines = []
    for line in plan.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0].isdigit():
            lines.append((int(fields[0]), fields[1], fields[2], fields[3]))
    return lines


def verdict_of(rep: dict[str, Any]) -> str:
    """An evaluation's verdict, or a sweep's over all sizes (``incomplete`` where sizes were not
    run and none failed)."""
    return sweep_verdict(rep) if "points" in rep else str(rep.get("verdict", "?"))


def last_failure(rep: dict[str, Any]) -> str:
    """Why a report does not answer its plan line, in a few words: its failure, or what a sweep's
    sizes came to (failed and not run counted apart: a size not run was never judged)."""
    failure = rep.get("failure") or {}
    if failure:
        return f"{failure.get('failure_class')}: {str(failure.get('message') or '')[:110]}"
    counts = sizes_in_words(rep)
    why = why_not_run(rep)
    return (counts + (f" ({why[:110]})" if why else "")) if counts else rep.get("verdict", "?")


def not_measured(evals: dict, sweeps: dict) -> list[str]:
    """The plan's lines no passing report answers yet: what the next device call should run. A
    failed report keeps its line open with the reason: every committed kernel is meant to pass,
    so a failure is a bug of the kernel or of the harness to fix and run again (the x2 fused
    all-gather + matmuls failed on the side's disk limit, since raised: 3f25b55)."""
    last = {("eval", slug, solution_file(name), ws): rep for (slug, name, ws), rep in evals.items()}
    last |= {("sweep", slug, solution_file(name), ws): rep for (slug, name, ws), rep in sweeps.items()}
    missing = []
    for ws, kind, slug, file in planned():
        if "@" in file or file == "reference":
            continue
        rep = last.get((kind, slug, file, ws))
        if rep is None:
            missing.append(f"- x{ws} {kind} {slug} `{file}`")
        elif verdict_of(rep) != "pass":
            said = "failed" if verdict_of(rep) == "fail" else verdict_of(rep)
            missing.append(f"- x{ws} {kind} {slug} `{file}` (the last run, {rep['started_at'][:16]}, "
                           f"{said}: {last_failure(rep)})")
    if not missing:
        return []
    return ["## Not measured yet", "",
            f"{len(missing)} lines of the batch's plan have no passing report here (the next device calls: "
            "`FROM=` or `ONLY=` in scripts/device/kernels_batch.sh):", ""] + missing + [""]


def page(evals: dict, sweeps: dict, sources: list[Path]) -> str:
    out = ["# Best known kernels (issue 23)",
           "",
           "Written by `scripts/device/kernels_doc.py` from the reports of `scripts/device/kernels_batch.sh`",
           "(one device call: `pkb eval` at the default size, sandbox on, and `pkb sweep` over message",
           "sizes, NCCL's own curve timed beside each kernel at every size). Files under `solutions/library/`",
           f"are {LIBRARY_NOTE}. Roofline fractions are the problem's roofline time over the side's median",
           "call; busbw follows nccl-tests ([sweeps.md](sweeps.md)).",
           "",
           "## At the default size",
           ""]
    out += eval_table(evals)
    out += ["", "## Message-size sweeps", ""]
    for (slug, name, ws), rep in sorted(sweeps.items()):
        out += sweep_section(slug, name, ws, rep)
    if not sweeps:
        out += ["None yet.", ""]
    out += targets_section(evals, sweeps)
    out += fixed_cost_section(sweeps)
    out += not_measured(evals, sweeps)
    out += ["## Where the numbers come from", "",
            "The reports are committed: " + ", ".join(f"`{source.relative_to(ROOT) if source.is_absolute() and ROOT in source.parents else source}`" for source in sources)
            + " (with the batch's log beside each archive: host, GPUs, commands, exit codes). Each passing "
            "evaluation is also a seed of the leaderboard's `human` row, `make up` shows it: "
            "`docs/results/<hardware profile>/` (`kernels_doc.py ... --results docs/results`).", ""]
    return "\n".join(out) + "\n"


def write_seeds(evals: dict, sweeps: dict, root: Path) -> list[Path]:
    """Each passing evaluation as a seed of the leaderboard's `human` row (docs/results/<hw>/,
    portal/submissions/importing.py): the report as it came, the committed file it ran, and the
    sweep of the same file (same source hash), which the portal attaches to that evaluation."""
    written = []
    for (slug, name, ws), rep in sorted(evals.items()):
        if rep["verdict"] != "pass" or not rep.get("timing"):
            continue
        if rep["timing"].get("align", "host") != "host":
            continue  # the board ranks the default method only; other alignments are measurements
        file = solution_file(name)
        library = file.startswith("solutions/library/")
        folder = root / str(rep.get("hardware_profile") or f"x{ws}")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{Path(file).parent.name}-{slug}-{name}.json"
        seed = {"model": "human", "provider": LIBRARY_NOTE if library else "PKB team (hand-written)",
                "source_path": file, "reports": [rep]}
        sweep = sweeps.get((slug, name, ws))
        if sweep is not None and sweep["solution"]["sha256"] == rep["solution"]["sha256"]:
            seed["sweeps"] = [sweep]
        path.write_text(json.dumps(seed, indent=1) + "\n")
        written.append(path)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "kernels.md")
    parser.add_argument("--results", type=Path, default=None,
                        help="also write each passing evaluation as a `human` seed here (docs/results)")
    args = parser.parse_args()
    evals: dict = {}
    sweeps: dict = {}
    for path, rep in reports(args.reports):
        slug = rep["problem"]["slug"]
        name = kernel_name(path, slug)
        ws = rep["setting"]["world_size"]
        if path.name.startswith("eval-"):
            newest(evals, (slug, name, ws), rep)
        elif path.name.startswith("sweep-"):
            newest(sweeps, (slug, name, ws), rep)
    args.out.write_text(page(evals, sweeps, [path.resolve() for path in args.reports]))
    print(f"wrote {args.out}: {len(evals)} evaluations, {len(sweeps)} sweeps")
    if args.results is not None:
        for path in write_seeds(evals, sweeps, args.results):
            print(f"seed: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
