"""Attack (all-reduce), unconfined (``--no-sandbox``): rewrite the judge's own copies of the
outputs on its disk, after they were taken and before they are compared.

Every call returns the rank's input unreduced (no communication at all: wrong, and fast). The
judge copies the outputs it draws out of the shared slots and, once the timing is over, writes
them to ``<workdir>/candidate/task0_<label>_rank<r>.pt``: then it thaws the candidate once more
to tell it ``finish``. Unconfined, a rank runs with the evaluator's rights in
``<workdir>/candidate-box/work``, so at ``finish`` rank 0 lists that directory: every file there
is a call the judge will compare (its trials and its drawn timed calls), and each rank's file
holds that rank's own input (what the lazy call returned). Rank 0 sums the two ranks' files and
writes the sum over both: every output the comparison reads is then right.

Measured 2026-11-29 on the 2-core machine, ``--size small``: PASS, 69 of 69 trials and checked
calls right, 1.80x [1.67, 2.08], with the sandbox off (before the fix). With the sandbox on, the workdir
is outside the side's mount namespace: value_mismatch.

Fix: unconfined, the judge hashes (SHA-256) each file's bytes as it makes them from its own
copy, before they reach the disk (``Judge.guard_files``, ``Judge.written``), and the comparison
loads each file from bytes it has just held to that hash (``outputs.load_candidate_outputs``):
a file changed after the judge wrote it is the candidate's ``protocol_violation``. The judged path
had lost the unconfined hashing that ``outputs.tampering`` gives the in-rank judge. Confined,
that disk is in none of the side's namespaces, and nothing is hashed.
"""

import os
from pathlib import Path

import torch
import torch.distributed as dist

_hooked = False
_rank = -1


def _fix_the_judges_files():
    box_work = Path(os.getcwd())  # <workdir>/candidate-box/work, the plain box's work directory
    judged = box_work.parent.parent / "candidate"
    if not judged.is_dir():
        return  # confined: the judge's disk is not in this mount namespace
    labels = sorted({p.name.rsplit("_rank", 1)[0] for p in judged.glob("task0_*_rank*.pt")})
    for label in labels:
        paths = [judged / f"{label}_rank{r}.pt" for r in (0, 1)]
        try:
            mine = [torch.load(p, weights_only=True) for p in paths]
        except Exception:  # noqa: BLE001
            continue
        total = [a.float().add(b.float()).to(a.dtype) for a, b in zip(mine[0], mine[1])]
        for path in paths:
            torch.save(total, path)


def _hook_finish():
    from evaluator import rank_timing

    original = rank_timing.CommandReader.next

    def next_command(self):
        command = original(self)
        if command.get("cmd") == "finish" and _rank == 0:
            _fix_the_judges_files()
        return command

    rank_timing.CommandReader.next = next_command


def solution(x, *, group):
    global _hooked, _rank
    if not _hooked:
        _hooked = True
        _rank = dist.get_rank(group)
        _hook_finish()
    return x.clone()  # unreduced: no communication at all
