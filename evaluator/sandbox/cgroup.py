"""A memory cgroup per side, where the host lets us make one: a cap on everything the side holds.

The init's watch sees resident memory and open memory files; a cgroup also charges what no
process shows (tmpfs pages, memory files in flight in a socket, kernel memory). Where:

- ``PKB_SANDBOX_CGROUP`` names a cgroup v2 directory delegated to the evaluator (systemd
  ``Delegate=yes``, or made by the operator) whose ``cgroup.subtree_control`` has ``memory``;
- else the cgroup v1 memory hierarchy, when it is mounted and we may make groups in it (root).

Elsewhere (cgroup v2 with no delegation: our own cgroup holds processes, so none of its children
can have the memory controller) the watch alone stands, as docs/sandbox.md says.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Optional

V1_MEMORY = Path("/sys/fs/cgroup/memory")


class SideCgroup:
    def __init__(self, path: Path, version: int) -> None:
        self.path = path
        self.version = version
        self.limit_bytes = 0

    def limit(self, nbytes: int) -> None:
        self.limit_bytes = nbytes
        if self.version == 2:
            (self.path / "memory.max").write_text(str(nbytes))
            swap = self.path / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
        else:
            (self.path / "memory.limit_in_bytes").write_text(str(nbytes))
            swap = self.path / "memory.memsw.limit_in_bytes"
            if swap.exists():
                try:
                    swap.write_text(str(nbytes))
                except OSError:
                    pass  # swap accounting off: memory alone is capped

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        """Processes the kernel killed for reaching the cap."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self, wait_s: float = 10.0) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # still busy: an empty group costs nothing and is named as ours
                time.sleep(0.05)


def side_cgroup() -> Optional[SideCgroup]:
    """A fresh, empty memory cgroup for one side, or None where the host gives us none."""
    name = f"pkb-side-{secrets.token_hex(6)}"
    delegated = os.environ.get("PKB_SANDBOX_CGROUP", "")
    candidates = []
    if delegated:
        candidates.append((Path(delegated) / name, 2))
    elif (V1_MEMORY / "memory.limit_in_bytes").exists():
        candidates.append((V1_MEMORY / name, 1))
    for path, version in candidates:
        try:
            path.mkdir()
            return SideCgroup(path, version)
        except OSError:
            continue
    return None
