"""Attack (all-reduce): fail in a way the portal cannot record. The channel's token is in this
process's memory: in its first call each rank reports an error in the harness's name whose
traceback and compiler output are a mapping and a number, not text, and exits. The judge copied
both into the report's failure, which then broke evaluator/report.schema.json: before the fix the
portal refused the worker's report (it checks every report against the schema), and the
evaluation was left with no verdict at all."""

import gc
import os
import sys

import torch.distributed as dist


def _channel():
    return next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)


def solution(x, *, group):
    channel = _channel()
    if channel is not None:
        dist.barrier(group=group)
        channel.send("error", task=0, failure_class="value_mismatch", message="wrong",
                     traceback={"not": "text"}, compiler_output=12345, compile_s=1e309)
        sys.stdout.flush()
        os._exit(1)
    return x.clone()
