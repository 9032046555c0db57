"""All-reduce: two ranks build one torch extension, as PKB's files do, and it fails. Rank 0 stands
for the rank that waited on torch's build lock: it finds no library and says so first, with no
compiler output of its own. Rank 1 stands for the rank that ran the compiler: it reports the
compiler's output a moment later. The report must carry rank 1's output (make test-long's
sandbox-off pass, 2026-11-28: the waiting rank's message was taken as the output)."""

import time

import torch.distributed as dist

from evaluator.cuda.errors import CompileError


def solution(x, *, group):
    if dist.get_rank(group) == 0:
        raise CompileError("torch extension pkb_shared_ext failed to build (load_inline) in another rank, "
                           "which holds the compiler's output: pkb_shared_ext.so: cannot open shared "
                           "object file: No such file or directory")
    time.sleep(0.5)
    raise CompileError("torch extension pkb_shared_ext failed to build (load_inline)",
                       "main.cpp:3:12: error: expected ')' before '{' token")
