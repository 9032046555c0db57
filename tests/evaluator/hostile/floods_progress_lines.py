"""Attack (all-reduce): make the evaluator print progress without end.

Every "ready" and "done" that rank 0 of a side sends becomes a progress event, which ``pkb eval
--progress`` prints as a line on its standard error and the worker writes to its log, one line
each. The harness sends each once; candidate code holds the token and may send them again, and a
judged candidate's second "ready" was taken as such (it replaced the first). So in its first call
rank 0 sends "ready" 200,000 times, then computes honestly. Before the fix the evaluation reported
200,001 progress events for the candidate (each a line in a worker's log: a rank can send them
for as long as its trial runs, and a trial that keeps a processor busy runs for the build limit).
"""

import gc

import torch.distributed as dist

_state = {"sent": False}


def solution(x, *, group):
    if not _state["sent"]:
        _state["sent"] = True
        channel = next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)
        if channel is not None and dist.get_rank(group) == 0:
            for _ in range(200_000):
                channel.send("ready")
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
