"""Hardware profiles as plain dicts, whichever way they are published.

The GPU engineer's ``evaluator.hardware.profiles`` is the source of truth once it exists; until
then (or if it fails to import) the committed ``hardware/*.json`` files are read directly. Keys
may be missing: every reader here tolerates that. One builtin profile describes the local CPU
worker (gloo processes), so the one-machine setup has a queue to send work to; it carries no
measurements.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Profile = dict[str, Any]

LOCAL_CPU: Profile = {
    "id": "local-cpu",
    "kind": "cpu",
    "name": "Local CPU (gloo processes)",
    "gpus": 0,
    "world_size": 2,
    "builtin": True,
    "description": "The machine running the portal: ranks are CPU processes over gloo, sizes are "
                   "the small presets. Timings here are for testing, never compared with GPUs.",
}


def _from_evaluator(directory: Path) -> list[Profile] | None:
    try:
        from evaluator.hardware import profiles as module  # type: ignore[import-not-found]
    except Exception:  # not landed yet, or broken: fall back to the JSON files
        return None
    for name in ("list_profiles", "all_profiles", "list", "profiles"):
        fn = getattr(module, name, None)
        if callable(fn):
            try:
                found = [dict(p) for p in fn(directory)]
            except Exception as exc:
                log.warning("evaluator.hardware.profiles.%s failed: %s", name, exc)
                return None
            return found
    return None


def _from_files(directory: Path) -> list[Profile]:
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            log.warning("skipping hardware profile %s: %s", path, exc)
            continue
        if isinstance(data, dict):
            data.setdefault("id", path.stem)
            found.append(data)
    return found


def load_profiles(directory: Path) -> list[Profile]:
    """Every published profile, plus the builtin local CPU one when no CPU profile is published."""
    profiles = _from_evaluator(directory)
    if profiles is None:
        profiles = _from_files(directory)
    if not any(str(p.get("kind", "")).lower() == "cpu" for p in profiles):
        profiles.append(dict(LOCAL_CPU))
    return profiles


def display_name(profile: Profile) -> str:
    if profile.get("name"):
        return str(profile["name"])
    gpus = profile.get("gpus")
    if isinstance(gpus, dict) and gpus.get("model"):
        return f"{gpus.get('count', '?')}x {gpus['model']}"
    host = profile.get("host") or {}
    if str(profile.get("kind")) == "cpu" and isinstance(host, dict) and host.get("cpu_model"):
        return f"{host['cpu_model']} ({profile.get('world_size', '?')} gloo ranks)"
    return str(profile.get("id", "?"))


def is_gpu(profile: Profile) -> bool:
    kind = str(profile.get("kind", "")).lower()
    return kind not in {"cpu", "gloo"} and gpu_count(profile) > 0


def gpu_count(profile: Profile) -> int:
    gpus = profile.get("gpus")
    if isinstance(gpus, list):
        return len(gpus)
    if isinstance(gpus, dict):
        return int(gpus.get("count") or 0)
    try:
        return int(gpus or 0)
    except (TypeError, ValueError):
        return 0
