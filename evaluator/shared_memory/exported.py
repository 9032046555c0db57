"""The judge's descriptor of a shared memory, which it hands to one rank and then closes."""

from __future__ import annotations

import os


class Exported:
    _fd: int = -1  # -1: none here (a rank's attached memory, or ours once the rank has its own)

    def fd(self) -> int:
        return self._fd

    def close_fd(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1
