"""Writes into the checkout it is run from: a module next to problems/__init__.py, a line appended
to problems/__init__.py and evaluator/__init__.py, files in evaluator/ and at the root of the
checkout. Without read-only mounts the next evaluation (or the site) would import its code."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

import evaluator
import problems

MARKER = "__MARKER__"
PROBLEMS = Path(problems.__file__).parent
EVALUATOR = Path(evaluator.__file__).parent
got_through: list[str] = []


def attack() -> None:
    payload = f"import os\nos.environ['PKB_OWNED'] = '{MARKER}'\n"
    for path in (PROBLEMS / f"{MARKER}.py", EVALUATOR / f"{MARKER}.py", EVALUATOR / "sandbox" / f"{MARKER}.py",
                 PROBLEMS.parent / f"{MARKER}.txt"):
        try:
            path.write_text(payload)
            got_through.append(f"wrote {path}")
        except OSError:
            pass
    for path in (PROBLEMS / "__init__.py", EVALUATOR / "__init__.py"):
        try:
            with open(path, "a") as handle:
                handle.write(f"\n# {MARKER}\n")
            got_through.append(f"appended to {path}")
        except OSError:
            pass
    try:
        os.chmod(PROBLEMS, 0o777)
        got_through.append(f"chmod {PROBLEMS}")
    except OSError:
        pass


attack()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    if got_through:
        print("got through:", got_through, file=sys.stderr, flush=True)
        return out * 0 + 42
    return out
