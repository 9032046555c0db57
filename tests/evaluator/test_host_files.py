"""The judge's reading of the host's table of open files (judge/host_files.py, red team, ninth
pass: fills_the_hosts_file_table): files a process keeps mapped count as its own, and only a
candidate holding its share of a table past half is blamed. The table's size is a stand-in here:
filling the real one refuses files to every other process of the host (test_judge_holes.py does
that once, serially, in make test-long)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evaluator.judge import host_files

MAPPED = 20_000

# Maps one small file MAPPED times, closing each descriptor: the files stay open, held by the maps.
HOLDER = f"""
import ctypes, os, sys, tempfile
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
handle, path = tempfile.mkstemp()
os.write(handle, b"\\0" * 4096)
os.close(handle)
for _ in range({MAPPED}):
    fd = os.open(path, os.O_RDONLY)
    libc.mmap(None, 4096, 1, 1, fd, 0)
    os.close(fd)
os.unlink(path)
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def holder():
    process = subprocess.Popen([sys.executable, "-S", "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    yield process.pid
    process.communicate("")


def test_files_a_process_keeps_mapped_count_as_held(holder):
    assert MAPPED <= host_files.held_by([holder]) < MAPPED + 200


def test_a_table_past_half_with_the_candidates_share_is_its_doing(holder, monkeypatch):
    monkeypatch.setattr(host_files, "host_files", lambda: (MAPPED + 1000, 2 * MAPPED))
    why = host_files.starved([holder])
    assert why is not None and "table of open files" in why


def test_a_table_filled_by_others_or_below_half_blames_no_candidate(holder, monkeypatch):
    monkeypatch.setattr(host_files, "host_files", lambda: (16 * MAPPED, 20 * MAPPED))  # others hold 15/16
    assert host_files.starved([holder]) is None
    monkeypatch.setattr(host_files, "host_files", lambda: (MAPPED + 1000, 4 * MAPPED))  # under half
    assert host_files.starved([holder]) is None
    monkeypatch.setattr(host_files, "host_files", lambda: (MAPPED + 1000, 2 * MAPPED))  # past half, not its
    assert host_files.starved([]) is None
