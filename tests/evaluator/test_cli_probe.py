"""`pkb probe --device cuda` on a host without a GPU ends with one line, not a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has a GPU: the probe would run")
def test_probe_without_a_gpu_says_so_in_one_line() -> None:
    done = subprocess.run([sys.executable, "-m", "evaluator.cli", "probe", "--device", "cuda"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("pkb probe: error: --device cuda needs a visible CUDA GPU")
    assert "--device cpu" in lines[0] and done.stdout == ""
