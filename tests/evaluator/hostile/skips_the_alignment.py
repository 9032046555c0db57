"""Attack (all-reduce): be scored faster than the reference while running the very same kernel,
by skipping the harness's per-call work that the reference pays.

Every call of a judged block goes through the rank-side shim (``evaluator/shim/calls.py``), which
runs ``runner.align()`` (a gloo barrier on the control group) before the call. The shim is the
candidate's to rewrite (docs/judge.md), so the judge's clock, which covers the whole block,
measures the reference's barrier on every call and the candidate's never. Here the kernel is the
reference's own (``x.clone()`` then ``all_reduce``): every output is right, every check passes,
and the only difference from the reference is the missing barrier per call.

Command: .venv/bin/python -m evaluator.cli eval --problem all-reduce \
    --solution tests/evaluator/hostile/skips_the_alignment.py --world-size 2 --device cpu --size small

Measured 2026-11-28 on the 2-core machine (load average ~3.5, sandbox on), alternating with
``solutions/broken/cpu_correct.py`` (the identical kernel with the harness untouched):
cpu_correct 1.032x, 0.884x, 1.024x; this file 1.221x, 1.658x, 1.409x (and 1.123x in a first run),
every one a PASS with all 69 trials and checked calls right.

Fix: make the alignment the judge's, not the shim's: in ``Judge.run_calls`` send ``go`` for call
i+1 to every rank only once every rank has said ``called`` for call i (a barrier the judge holds,
costing both sides alike), and drop the shim's own barrier in judged phases (``"align": False`` in
the calls' commands, for the reference too). Whatever per-call work only the harness does must
either be the judge's or be absent from both sides; a rank-side step the reference pays and the
candidate can delete is a free speedup.
"""

import torch.distributed as dist

_patched = False


def _patch():
    from evaluator import rank_runner

    rank_runner.TaskRunner.align = lambda self: None


def solution(x, *, group):
    global _patched
    if not _patched:
        _patched = True
        _patch()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
