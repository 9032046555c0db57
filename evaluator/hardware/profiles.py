"""The committed hardware profiles (hardware/*.json at the repository root)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

Profile = dict[str, Any]


def hardware_dir() -> Path:
    """PKB_HARDWARE_DIR, else the repository's hardware/ folder beside the evaluator package."""
    override = os.environ.get("PKB_HARDWARE_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "hardware"


def list_profiles(directory: Optional[Path] = None) -> list[Profile]:
    root = directory or hardware_dir()
    profiles = []
    for path in sorted(root.glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "id" in data and "kind" in data:
            profiles.append(data)
    return profiles


def get_profile(profile_id: str, directory: Optional[Path] = None) -> Profile:
    for profile in list_profiles(directory):
        if profile["id"] == profile_id:
            return profile
    known = [p["id"] for p in list_profiles(directory)]
    raise KeyError(f"no hardware profile {profile_id!r}; known: {known}")


def _size(profile: Profile) -> int:
    if profile["kind"] == "gpu":
        return int(profile["gpus"]["count"])
    return int(profile.get("world_size") or 0)


def default_profile(device: str, world_size: int, directory: Optional[Path] = None,
                    gpu_model: Optional[str] = None) -> Optional[Profile]:
    """The profile to use for a run of ``world_size`` ranks on ``device`` ("cuda" or "cpu").

    Preference: the GPU model the run has (``gpu_model``, as the driver names it), whatever the
    count; then as many GPUs (or gloo ranks) as the run, else the fewest above it, else the most
    below it; ties go to the newest measurement. None when no profile of that kind exists. (Without
    the model, a run on 2 x H200 took the newer H100 pair's profile on 2026-11-28.)
    """
    kind = "gpu" if device in ("cuda", "gpu") else "cpu"
    candidates = [p for p in list_profiles(directory) if p["kind"] == kind]
    if not candidates:
        return None

    def rank(p: Profile) -> tuple[int, int, int]:
        other_model = int(bool(gpu_model) and (p.get("gpus") or {}).get("model") != gpu_model)
        size = _size(p)
        if size == world_size:
            tier, distance = 0, 0
        elif size > world_size:
            tier, distance = 1, size - world_size
        else:
            tier, distance = 2, world_size - size
        return (other_model, tier, distance)

    # Newest first among equals: sort by measured_at descending, then by the rank (min is stable).
    candidates.sort(key=lambda p: p.get("measured_at", ""), reverse=True)
    return min(candidates, key=rank)


def roofline(profile: Profile) -> dict[str, Any]:
    """The roofline block: link_gbps, hbm_gbps, tflops {bfloat16, float32}, note."""
    return dict(profile["roofline"])
