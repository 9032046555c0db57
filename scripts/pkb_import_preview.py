"""What importing ParallelKernelBench run directories does: each one imported for real, through
the API as `pkb run import` sends it, into a throwaway portal (SQLite and a filesystem broker in
a temporary directory, removed afterwards; no worker needed: the liveness check is off there).

    .venv/bin/python scripts/pkb_import_preview.py DIR [DIR ...] [--hardware h200-x2-nvlink]
        [--list FILE]

Prints one row per directory: files, accepted (and how many of those use NVLink multicast), and
every refusal code with its count; --list writes each accepted file (directory/file, PKB id,
problem) as tab-separated lines.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--hardware", default="h200-x2-nvlink")
    parser.add_argument("--list", type=Path, help="write the accepted files here")
    args = parser.parse_args()
    var = tempfile.mkdtemp(prefix="pkb-import-")
    os.environ.update(DJANGO_SETTINGS_MODULE="portal.settings.local", PKB_VAR_DIR=var, PKB_DEBUG="0",
                      PKB_REQUIRE_LIVE_WORKER="0", PKB_BROKER_URL="filesystem://")
    os.environ.pop("DATABASE_URL", None)
    sys.path[:0] = [str(ROOT), str(ROOT / "client")]
    try:
        return _import_all(args)
    finally:
        shutil.rmtree(var, ignore_errors=True)


def _import_all(args: argparse.Namespace) -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.test import APIClient

    from pkb_client.pkbdir import pack
    from portal.runs.pkb.importer import MULTICAST_NOTE

    call_command("migrate", verbosity=0)
    call_command("load_catalog", verbosity=0)
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create(username="importer", is_staff=True))
    print(f"# {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, imported on {args.hardware}")
    print("| directory | files | accepted | of which use multicast | refused |")
    print("|---|---|---|---|---|")
    listing = []
    for directory in args.dirs:
        blob, count = pack(directory)
        r = client.post("/api/v1/runs/pkb-import/", {"archive": _file(directory.name, blob),
                                                     "hardware": args.hardware}, format="multipart")
        body = r.json()
        files = body.get("files") or []
        accepted = [f for f in files if f["status"] == "accepted"]
        if r.status_code not in (201, 400) or len(files) != count:
            print(f"{directory.name}: HTTP {r.status_code}: {body.get('error')}", file=sys.stderr)
            return 1
        codes = Counter(f["code"] for f in files if f["status"] != "accepted")
        multicast = sum(MULTICAST_NOTE in (f["message"] or "") for f in accepted)
        refused = ", ".join(f"{n} {c}" for c, n in sorted(codes.items())) or "-"
        print(f"| `{directory.name}` | {len(files)} | {len(accepted)} | {multicast} | {refused} |")
        listing += [f"{directory.name}/{f['name']}\t{f['pkb_id']}\t{f['problem']}" for f in accepted]
    print(f"total accepted: {len(listing)}")
    if args.list:
        args.list.write_text("".join(line + "\n" for line in listing))
    return 0


def _file(name: str, blob: bytes) -> object:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(f"{name}.tar.gz", blob)


if __name__ == "__main__":
    sys.exit(main())
