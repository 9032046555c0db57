"""Attack (all-reduce), class 5: hang, and keep the watchdog happy. The status channel's token is
in this process's memory (the channel object holds it): a thread writes a well-formed progress
message every second while the call sleeps for 75 s, well past the per-step limit."""

import gc
import threading
import time


def _beat():
    channel = next((o for o in gc.get_objects() if type(o).__name__ == "RankChannel"), None)
    while channel is not None:
        channel.send("step", task=0, step="still working")
        channel.send("build")
        time.sleep(1.0)


def solution(x, *, group):
    threading.Thread(target=_beat, daemon=True).start()
    time.sleep(75)
    return x.clone()
