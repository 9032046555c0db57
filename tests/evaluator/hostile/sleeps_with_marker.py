"""Not an attack: a candidate that hangs (a process with the marker in its command line, and the
rank itself), so a test can kill the evaluator under it and look for survivors."""

import subprocess
import sys
import time

subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "__MARKER__"], start_new_session=True)


def solution(x, *, group):
    time.sleep(600)
    return x
