"""What freezing and thawing a side costs: two ranks of 9 threads each, frozen and thawed 30 times.

    .venv/bin/python scripts/bench/freeze_cost.py on     # the confined box
    .venv/bin/python scripts/bench/freeze_cost.py off    # unconfined
"""
import os, sys, time, tempfile, statistics
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from evaluator.config import ResourceLimits
from evaluator.sandbox import RankLaunch, open_box
from evaluator.sandbox.policy import rank_env
confined = sys.argv[1] == "on"
with tempfile.TemporaryDirectory() as tmp:
    inbox = Path(tmp) / "in"; inbox.mkdir()
    box = open_box(Path(tmp), inbox, "cpu", ResourceLimits(), confined=confined)
    launches = []
    for r in range(2):
        lr, lw = os.pipe(); sr, sw = os.pipe(); os.close(sw)
        env = rank_env("cpu", 1, home=box.home, work=box.work, confined=confined)
        launches.append(RankLaunch(r, [sys.executable, "-c", "import threading,time\n[threading.Thread(target=time.sleep,args=(100,)).start() for _ in range(8)]\nwhile True: time.sleep(0.001)"], env, (), lw, sr))
    box.start(launches)
    time.sleep(1.5)
    f, t = [], []
    for _ in range(30):
        a = time.perf_counter(); ok = box.freeze(); b = time.perf_counter(); box.thaw(); c = time.perf_counter()
        assert ok
        f.append((b - a) * 1e3); t.append((c - b) * 1e3)
    print("freeze ms median", statistics.median(f), "max", max(f), "thaw ms median", statistics.median(t))
    box.stop(); box.close()
