"""Render docs/problems-h200.md from `pkb check-references --time --json` outputs.

    python scripts/device/render_refs.py docs/measurements/refs-x4-2026-11-21.json \
        [docs/measurements/refs-rerun-x4-2026-11-21.json ...] > docs/problems-h200.md

Later files replace earlier rows of the same problem (a re-run after a fix).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import problems  # noqa: E402


def main(paths: list[str]) -> None:
    rows: dict[str, dict] = {}
    sources = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        sources.append(path)
        for row in data["rows"]:
            rows[row["slug"]] = {**row, "file": Path(path).name}
    ok = sum(1 for r in rows.values() if r["status"] == "ok")
    print("# Every reference under NCCL on 4 x H200 (default preset)\n")
    print("Measured 2026-11-21 on the lent `nvidia-h200-x4` machine (4 x H200, every pair NV18, "
          "driver 580.159.04, torch 2.11.0+cu130, NCCL 2.28.9) with NVLink multicast off, by")
    print("\n    bash scripts/device/gpu_batch.sh probe kernels refs pack    # runs:")
    print("    python3 -m evaluator.cli check-references --device cuda --size default --world-size 4 --time --chunk 20\n")
    print("Each reference ran one seeded trial (finite outputs checked), then the evaluator's timing "
          "loop (ranks aligned before every call, slowest rank per call, inputs rotated past L2, "
          "0.3-1 s or 10-50 calls). Roofline time = the problem's traffic at the rates of "
          "`hardware/h200-x4-nvlink.json` (link 347.7 GB/s per GPU per direction, HBM 4252 GB/s, "
          "bf16 785 TFLOP/s, fp32 50.9 TFLOP/s); fraction = roofline time / median.\n")
    print("In the first run four problems failed: all four ranks stalled (two in timing, one in a trial) "
          "or a halo arrived as garbage (NaN). The cause was the evaluator's, not the references': each "
          "rank chose its own number of time-based warm-up calls, so ranks could issue different numbers "
          "of collectives. Warm-up length is now agreed through the control all-reduce (commit "
          "\"Warm-up length is agreed by all ranks\"); the re-run of those problems and their neighbours "
          "passed and replaces their rows below.\n")
    print(f"Result: {ok} of {len(rows)} references ran and were timed. Sources: "
          + ", ".join(f"`docs/measurements/{Path(s).name}`" for s in sources) + ".\n")
    print("† The problem module changed after this run (its `version` in the measurement file is not the "
          "current one), so the row times the earlier reference; the portal shows no baseline for it "
          "until it is timed again.\n")
    print("| id | problem | categories | median ms | p10-p90 ms | roofline ms | bound | roofline fraction |")
    print("|---|---|---|---|---|---|---|---|")
    by_slug = {p.slug: p for p in problems.all_problems()}
    for slug, r in sorted(rows.items(), key=lambda kv: by_slug[kv[0]].id if kv[0] in by_slug else 0):
        p = by_slug.get(slug)
        cats = ", ".join(p.categories) if p else ""
        pid = p.id if p else ""
        stale = p is not None and r.get("version") not in (None, problems.version(p))
        slug_cell = f"{slug} (earlier version †)" if stale else slug
        if r["status"] != "ok":
            print(f"| {pid} | {slug_cell} | {cats} | {r['status']}: {r['message']} | | | | |")
            continue
        print(f"| {pid} | {slug_cell} | {cats} | {r['median_ms']:.4f} | {r['p10_ms']:.4f}-{r['p90_ms']:.4f} | "
              f"{r['roofline_ms']:.4f} | {r['roofline_bound']} | {r['roofline_fraction']:.1%} |")


if __name__ == "__main__":
    main(sys.argv[1:])
