"""GPU memory a side's processes hold, from ``nvidia-smi``: whose failure a starved reference is.

Both sides' ranks of a GPU are alive at once (the paired timing, in-rank or judged outside), and a
side's GPU memory is bounded by the device alone. A candidate that takes a GPU's free memory at
import leaves the reference none for its CUDA context, NCCL's buffers or its outputs; the
reference then fails, and what the reference does wrong is ours (harness_error): a wrong candidate
would never read as wrong (red team, eighth pass, left open there). So when the reference fails
while the candidate's processes still live, the judge asks the driver what they hold: more than
half of a GPU that both sides share is the candidate's ``resource_limit``. Honest candidates hold a
few GiB of an 80-141 GiB GPU at the default sizes.
"""

from __future__ import annotations

from typing import Optional

from .smi import run_smi

SHARE = 0.5  # of a GPU's memory: each of the two sides on it may hold up to this


def held_by(pids: list[int], smi: Optional[str] = None, gpus: Optional[str] = None) -> dict[int, tuple[int, int]]:
    """GPU index -> (MiB held by these host process ids, the GPU's total MiB). ``smi`` and
    ``gpus``: ``nvidia-smi`` outputs to parse instead of asking it (tests)."""
    apps = smi if smi is not None else run_smi("--query-compute-apps=pid,gpu_uuid,used_memory",
                                                "--format=csv,noheader,nounits", timeout=10.0)
    table = gpus if gpus is not None else run_smi("--query-gpu=uuid,index,memory.total",
                                                  "--format=csv,noheader,nounits", timeout=10.0)
    if not apps or not table:
        return {}
    devices: dict[str, tuple[int, int]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 3 and cells[1].isdigit() and cells[2].isdigit():
            devices[cells[0]] = (int(cells[1]), int(cells[2]))
    wanted = set(pids)
    held: dict[int, tuple[int, int]] = {}
    for line in apps.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 3 or not cells[0].isdigit() or not cells[2].isdigit() or cells[1] not in devices:
            continue  # "[N/A]" where the driver does not say
        if int(cells[0]) in wanted:
            index, total = devices[cells[1]]
            held[index] = (held.get(index, (0, total))[0] + int(cells[2]), total)
    return held


def starved_by(pids: list[int], **outputs: Optional[str]) -> Optional[str]:
    """Why a failed reference is the candidate's (its processes ``pids`` hold more than their share
    of a GPU), or None."""
    for index, (used, total) in sorted(held_by(pids, **outputs).items()):
        if total and used > SHARE * total:
            return (f"the candidate's processes held {used} MiB of GPU {index}'s {total} MiB when the reference "
                    f"failed: both sides share each GPU, and a side may hold at most {SHARE:.0%} of it")
    return None
