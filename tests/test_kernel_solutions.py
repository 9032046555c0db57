"""The kernels batch (scripts/device/kernels_batch.sh) without a GPU: every file its plan names
exists, imports and can be called as its problem's reference is; every CUDA source in
solutions/symm_mem compiles for sm_90 where nvcc is installed. A mistake here would otherwise
cost a device call to find.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import problems
from evaluator.candidate import load_solution

ROOT = Path(__file__).resolve().parents[1]
BATCH = ROOT / "scripts" / "device" / "kernels_batch.sh"


def plan_entries() -> list[tuple[str, str]]:
    text = BATCH.read_text()
    plan = re.search(r'^PLAN="\n(.*?)^"', text, re.S | re.M)
    assert plan, "kernels_batch.sh has no PLAN block"
    entries = []
    for line in plan.group(1).splitlines():
        fields = line.split()  # world size, kind, problem, file[@variant], [sizes]
        if len(fields) >= 4 and fields[3] != "reference":
            entries.append((fields[2], fields[3].split("@")[0]))
    return sorted(set(entries))


def cuda_sources() -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / "solutions" / "symm_mem").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SOURCE" for t in node.targets):
                found.append((str(path.relative_to(ROOT)), ast.literal_eval(node.value)))
    return found


def test_the_plan_names_kernels_for_the_issue_problems():
    slugs = {slug for slug, _ in plan_entries()}
    assert {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "tp-allgather-gemm",
            "tp-gemm-reducescatter", "moe-dispatch-all-to-all", "moe-combine-all-to-all"} <= slugs


def test_the_variants_the_plan_asks_for_change_the_constant_they_name():
    # make_variant rewrites these lines with sed; a renamed constant would silently sweep the
    # unchanged file under a variant's name.
    text = (ROOT / "solutions" / "symm_mem" / "all_reduce_two_shot.py").read_text()
    assert re.search(r"^ONE_SHOT_MAX_BYTES = ", text, re.M)
    assert re.search(r"^ONE_SHOT_MAX_BYTES_DEFAULT = ", text, re.M)


@pytest.mark.parametrize("slug,file", plan_entries())
def test_each_planned_file_imports_and_takes_the_reference_arguments(slug, file):
    load_solution(ROOT / file, problems.get(slug))  # raises CandidateError on any mismatch


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
@pytest.mark.parametrize("file,source", cuda_sources(), ids=lambda v: v if v.endswith(".py") else "")
def test_each_cuda_source_compiles_for_sm_90(file, source, tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text(source)
    built = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "k.cubin"), str(cu)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
