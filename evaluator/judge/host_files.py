"""The host's table of open files, as the judge reads it before it runs the reference beside a
frozen candidate.

The kernel keeps one table of open files for the whole host (``fs.file-max``), whatever the
namespace: past it only a process with CAP_SYS_ADMIN over the host may open a file (ENFILE for
every other). A side's descriptors are bounded per process (``RLIMIT_NOFILE``), but a file mapped
into memory stays open once its descriptor is closed, up to ``vm.max_map_count`` mappings a
process, and no memory cap notices the 400 bytes each costs. So a candidate whose helpers mapped
a small file 2.5 million times held the host's whole table while it stood frozen, and the
reference's sandbox, started beside it, could not open what it needed: a wrong candidate ended
as our harness_error (red team, ninth pass: fills_the_hosts_file_table). Every process of the
host without that capability was refused files meanwhile.

As for TCP memory (host_tcp.py), two things: the table past half of its size, and the
candidate's own share of it (an eighth, counting its processes' descriptors and the mappings
of files they hold), so that another process filling the table fails no honest candidate. The
share is read only when the table is past half: a reading of one small file otherwise.
"""

from __future__ import annotations

import os
from typing import Iterable, Optional


def host_files() -> Optional[tuple[int, int]]:
    """Open files of the whole host and the most it may hold (/proc/sys/fs/file-nr); None if it
    cannot be read (with the table full, only a process with CAP_SYS_ADMIN may open it)."""
    try:
        with open("/proc/sys/fs/file-nr", "rb") as handle:
            used, _, most = (int(value) for value in handle.read().split())
    except (OSError, ValueError):
        return None
    return used, most


def _mapped_files(pid: int) -> int:
    """File-backed mappings of a process (each may hold a file open, with no descriptor): read
    through a living thread where the main thread has exited alone (its maps are then empty)."""
    views = [f"/proc/{pid}"]
    try:
        views += [f"/proc/{pid}/task/{tid}" for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        pass
    for view in views:
        try:
            with open(f"{view}/maps", "rb") as handle:
                count = sum(1 for line in handle if line.split(None, 5)[4:5] not in ([], [b"0"]))  # its inode
        except OSError:
            continue
        if count:
            return count
    return 0


def held_by(pids: Iterable[int]) -> int:
    """Open files these processes hold: their descriptors and their file-backed mappings (a file
    mapped more than once counts once a mapping: this errs towards the candidate)."""
    held = 0
    for pid in pids:
        try:
            held += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
        held += _mapped_files(pid)
    return held


def starved(pids: Iterable[int]) -> Optional[str]:
    """Why the reference cannot be run now for want of open files, with the candidate stopped, or
    None: the host's table past half of its size, and the candidate's processes (``pids``)
    holding an eighth of what is open."""
    reading = host_files()
    if reading is None:
        return None  # unreadable: nothing to attribute, and nothing here to blame
    used, most = reading
    if used * 2 < most:
        return None
    held = held_by(pids)
    if held * 8 < used:
        return None  # filled by others, not this candidate
    return (f"the host's table of open files held {used:,} of its {most:,} while the candidate stood "
            f"stopped, {held:,} of them the candidate's (descriptors and files it keeps mapped): one table "
            "for the whole host, and the reference, started beside it, could not open its own")
