"""The reference's exact run must not pay for torch.compile's machinery it never uses."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_exact_warm_up_does_not_import_dynamo():
    # torch wraps a dispatch mode's handler so that Dynamo skips it, importing torch._dynamo on the
    # first call: seconds of every reference rank's start-up on a GPU host. Our mode opts out.
    code = ("import sys, torch\nfrom evaluator.exact import warm_up, exact_outputs\nwarm_up()\n"
            "run = exact_outputs(lambda g: (g['x'].float() * 3).sum(), {'x': torch.ones(4, dtype=torch.bfloat16)})\n"
            "assert run.outputs[0].dtype == torch.float64 and float(run.outputs[0]) == 12.0, run.outputs\n"
            "print('torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
