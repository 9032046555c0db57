"""Hardware profiles as plain dicts, read through ``evaluator.hardware.profiles`` (the source of
truth for the committed ``hardware/*.json``). Keys may be missing: every reader here tolerates
that. One builtin profile describes the local CPU worker (gloo processes), so the one-machine
setup has a queue to send work to; it carries no measurements.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from evaluator.hardware.profiles import list_profiles

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


def load_profiles(directory: Path, always_local: bool = False) -> list[Profile]:
    """Every published profile, plus the builtin local CPU one when no CPU profile is published
    (or always, with ``always_local``: the production stack on one machine runs a worker on each
    of two CPU queues)."""
    try:
        profiles = [dict(p) for p in list_profiles(directory)]
    except (OSError, ValueError) as exc:  # a broken file must not take the catalog down
        log.warning("hardware profiles in %s unreadable: %s", directory, exc)
        profiles = []
    if always_local or not any(str(p.get("kind", "")).lower() == "cpu" for p in profiles):
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
