"""Attack (all-reduce), class 7: the sides take turns, so slow the other side down while it is
timed. Four processes, started at import and detached from the rank (their own session), spin on
every core for the whole evaluation; the candidate's own calls are honest. Unfrozen, they slowed
the reference's rounds on a 2-core host and doubled the speedup."""

import subprocess
import sys

import torch.distributed as dist

SPIN = "import time\nwhile True:\n    pass\n"
_burners = [subprocess.Popen([sys.executable, "-c", SPIN, "__PKB_BURNER__"], start_new_session=True)
            for _ in range(4)]


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
