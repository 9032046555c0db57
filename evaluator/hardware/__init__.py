"""Hardware profiles: what ``pkb probe`` measures and the roofline reads.

``probe.main(argv)`` / ``probe.probe(device, out_path)`` measure this machine;
``profiles.get_profile(id)`` / ``profiles.default_profile(device, world_size)`` read the
committed ones. Importing this package measures nothing.
"""

from __future__ import annotations

from .profiles import default_profile, get_profile, hardware_dir, list_profiles, roofline

__all__ = ["default_profile", "get_profile", "hardware_dir", "list_profiles", "roofline"]
