"""Print the table of a kernels batch: every eval report and every sweep point under a folder.

    python3 scripts/device/kernels_table.py DIR

Reads DIR/eval-<slug>-<kernel>-x<N>.json (pkb eval --json) and DIR/sweep-<slug>-<kernel>-x<N>.json
(pkb sweep --out), as scripts/device/kernels_batch.sh names them. Standard library only, so it
runs with the GPU host's python3 as it is. Missing or unreadable reports are listed, not fatal.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from sweep_outcomes import sizes_in_words, sweep_verdict


def kernel_name(path: Path, slug: str) -> str:
    """eval-all-reduce-all_reduce_two_shot-x2.json -> all_reduce_two_shot; a run with
    ALIGN=device (eval-...-x2-align-device.json) -> all_reduce_two_shot_align_device."""
    stem = path.stem.split("-", 1)[1]            # drop eval / sweep
    stem = stem[len(slug) + 1:] if stem.startswith(slug + "-") else stem
    stem, _, align = stem.partition("-align-")
    name = stem.rsplit("-x", 1)[0]
    return f"{name}_align_{align}" if align else name


def interval_text(low: Optional[float], high: Optional[float]) -> str:
    return f"[{low:.3f}, {high:.3f}]" if low is not None and high is not None else "no interval"


def fraction_text(value: Optional[float]) -> str:
    return f"{value:.2f}" if value is not None else "-"


def eval_row(path: Path, report: dict[str, Any]) -> str:
    slug = report["problem"]["slug"]
    setting = report["setting"]
    timing = report.get("timing") or {}
    failure = report.get("failure") or {}
    verdict = report["verdict"] + (f" ({failure.get('failure_class')})" if failure else "")
    if timing:
        interval = timing.get("interval") or {}
        speed = f"{timing['speedup']:.3f} {interval_text(interval.get('low'), interval.get('high'))}"
        cand = fraction_text(timing["candidate"].get("roofline_fraction"))
        ref = fraction_text(timing["reference"].get("roofline_fraction"))
        times = f"{timing['reference']['median_ms']:.4f} / {timing['candidate']['median_ms']:.4f}"
    else:
        speed, cand, ref, times = "-", "-", "-", "-"
    return (f"{kernel_name(path, slug):34} {slug:30} x{setting['world_size']} {setting['size']:8} "
            f"{speed:28} {cand:>6} {ref:>6}  {times:21} {verdict}")


def sweep_rows(path: Path, report: dict[str, Any]) -> list[str]:
    slug = report["problem"]["slug"]
    counts = sizes_in_words(report)  # failed and not run apart: a size not run was never judged
    head = (f"{kernel_name(path, slug)} on {slug}, x{report['setting']['world_size']}, "
            f"{report['setting']['dtype']}, verdict {sweep_verdict(report)}"
            f"{f' ({counts})' if counts else ''}, {report['wall_s']:.0f} s")
    rows = [head]
    for point in report["points"]:
        size = f"{point['message_bytes'] / 1024:.0f}K" if point["message_bytes"] < 2**20 \
            else f"{point['message_bytes'] / 2**20:.0f}M"
        timing = point.get("timing")
        if point.get("skipped"):
            rows.append(f"  {size:>6}  skipped: {point['skipped']}")
            continue
        if not timing:
            fail = point.get("failure") or {}
            rows.append(f"  {size:>6}  {point['verdict']} {fail.get('failure_class', '')}: "
                        f"{str(fail.get('message', ''))[:100]}")
            continue
        iv = timing.get("interval") or {}

        def gbps(key: str) -> str:
            return f"{timing[key]:.1f}" if timing.get(key) is not None else "-"

        rows.append(
            f"  {size:>6}  {point['verdict']:4}  ref {timing['reference_ms']:.4f} ms  cand "
            f"{timing['candidate_ms']:.4f} ms  speedup {timing['speedup']:.3f} "
            f"{interval_text(iv.get('low'), iv.get('high'))}  busbw ref {gbps('reference_busbw_gbps')}"
            f" cand {gbps('candidate_busbw_gbps')} roof {gbps('roofline_busbw_gbps')}  "
            f"cand/roof {fraction_text(timing.get('candidate_roofline_fraction'))}")
    return rows


def main(folder: Path) -> int:
    evals, sweeps, bad = [], [], []
    for path in sorted(folder.glob("*.json")):
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            bad.append(f"{path.name}: {err}")
            continue
        try:
            if path.name.startswith("eval-"):
                order = (report["setting"]["world_size"], report["problem"]["slug"], path.name)
                evals.append((order, eval_row(path, report)))
            elif path.name.startswith("sweep-"):
                sweeps.extend(sweep_rows(path, report))
        except (KeyError, TypeError) as err:
            bad.append(f"{path.name}: unexpected report ({err!r})")
    print(f"{'kernel':34} {'problem':30} ws {'size':8} {'speedup [95%]':28} {'roof':>6} {'refroof':>6}  "
          f"{'ref / cand ms':21} verdict")
    print("\n".join(row for _, row in sorted(evals)) if evals else "(no eval reports)")
    print()
    print("\n".join(sweeps) if sweeps else "(no sweep reports)")
    for line in bad:
        print("unreadable:", line)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
