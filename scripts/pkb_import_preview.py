"""What the ParallelKernelBench importer would do with run directories, without a portal.

    DJANGO_SETTINGS_MODULE=portal.settings.local .venv/bin/python scripts/pkb_import_preview.py \
        DIR [DIR ...] [--adapter-mapping]

Prints one row per directory: files, accepted (and how many of those use NVLink multicast), and
every refusal code with its count. The mapping is the problems' ``pkb_ids``; with
``--adapter-mapping`` it is the adapters' own (PKB id, problem) pairs instead, which shows what
the adapters could take before the metadata exists. Problem-level checks (the problem loaded in
the catalog, its world size on the hardware) happen only in a real import.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--adapter-mapping", action="store_true")
    args = parser.parse_args()
    import django

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    django.setup()
    from portal.runs.archives import Entry
    from portal.runs.pkb import importer
    from portal.runs.pkb.adapters import ADAPTERS

    if args.adapter_mapping:
        pairs = {a.pkb_id: [a.slug] for a in ADAPTERS}
        importer.pkb_index = lambda: pairs  # type: ignore[assignment]
    print(f"# {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, mapping: "
          f"{'adapter pairs' if args.adapter_mapping else 'problems pkb_ids'}")
    print("| directory | files | accepted | multicast | refused |")
    print("|---|---|---|---|---|")
    for directory in args.dirs:
        entries = [Entry(f.name, f.read_bytes()) for f in sorted(directory.glob("*.py"))]
        plans = importer.plans_from_pkb(entries)
        codes = Counter(p.code for p in plans if p.code)
        accepted = [p for p in plans if not p.code]
        multicast = sum(p.message == importer.MULTICAST_NOTE for p in accepted)
        refused = ", ".join(f"{n} {c}" for c, n in sorted(codes.items())) or "-"
        print(f"| `{directory.name}` | {len(plans)} | {len(accepted)} | {multicast} | {refused} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
