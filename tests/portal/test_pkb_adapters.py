"""Every ParallelKernelBench adapter against a solution written to PKB's signature.

Every adapter has one such file, named as PKB names its solution files (``<n>_<name>_<backend>.py``)
and written here from PKB's reference signatures (plain torch.distributed, no kernel): the right
ones of the model directory the import tests use (tests/portal/data/pkb/), and in
tests/portal/data/pkb_adapters/ one for each adapter that directory leaves out. Each is wrapped as the importer wraps it and evaluated on CPU: it
must pass, and every adapter must have such a file and map a PKB id the problems' metadata maps
to that problem.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import problems
from evaluator.api import evaluate
from evaluator.config import EvalConfig, Limits
from portal.runs.pkb.adapters import ADAPTERS
from portal.runs.pkb.names import parse_file, references
from portal.runs.pkb.wrapper import wrap

DATA = Path(__file__).parent / "data" / "pkb_adapters"
IMPORT_DIRECTORY = Path(__file__).parent / "data" / "pkb" / "solutions_cuda_bf16_h100_8_testlab_pkb-signature-model"
WRONG_ON_PURPOSE = {"8_alltoall_cuda.py"}  # the import tests' failing file; DATA has a right one


def _adapted(path: Path) -> bool:
    parsed = parse_file(path.name)
    return (parsed is not None and parsed.pkb_id is not None and path.name not in WRONG_ON_PURPOSE
            and any(a.pkb_id == parsed.pkb_id for a in ADAPTERS))


FILES = sorted([*DATA.glob("*.py"), *filter(_adapted, IMPORT_DIRECTORY.glob("*.py"))],
               key=lambda p: p.name)
LIMITS = Limits(startup_s=120.0, step_s=60.0, total_s=240.0)


def _pkb_id(path: Path) -> int:
    parsed = parse_file(path.name)
    assert parsed is not None and parsed.pkb_id is not None, f"{path.name} is not named as PKB names a solution"
    return parsed.pkb_id


def test_every_adapter_has_a_pkb_signature_solution_and_a_mapping():
    ids = [_pkb_id(path) for path in FILES]
    assert len(ids) == len(set(ids)), "two solution files for one PKB id"
    covered = set(ids)
    mapped = {(i, p.slug) for p in problems.all_problems() for i in p.pkb_ids}
    for adapter in ADAPTERS:
        assert adapter.pkb_id in covered, f"{adapter.name}: add a PKB-signature solution to {DATA}"
        assert (adapter.pkb_id, adapter.slug) in mapped, \
            f"{adapter.name}: the problem's pkb_ids do not map PKB {adapter.pkb_id} to it"


# A whole evaluation each: `make test` runs three kinds of adapter (a collective, a fused GEMM, a
# Ulysses all-to-all), `make test-long` every other one.
IN_MAKE_TEST = {"1_allreduce_cuda", "16_gemm_reducescatter_cuda", "34_ulysses_all_to_all_tensor_primitive_cuda"}
assert IN_MAKE_TEST <= {p.stem for p in FILES}, f"not a solution file here: {IN_MAKE_TEST - {p.stem for p in FILES}}"
ADAPTED = [pytest.param(p, id=p.stem, marks=() if p.stem in IN_MAKE_TEST else pytest.mark.long)
           for p in FILES]


@pytest.mark.slow
@pytest.mark.parametrize("path", ADAPTED)
def test_an_adapter_passes_a_solution_written_to_pkbs_signature(path: Path, tmp_path: Path) -> None:
    pkb_id = _pkb_id(path)
    adapter = next(a for a in ADAPTERS if a.pkb_id == pkb_id)
    wrapped = tmp_path / f"pkb{pkb_id}.py"
    wrapped.write_text(wrap(path.read_text(), file=path.name, pkb_id=pkb_id,
                            pkb_name=references()[pkb_id], adapter=adapter))
    report = dict(evaluate(EvalConfig(problem=adapter.slug, solution_path=wrapped, world_size=2,
                                      device="cpu", size="small", trials=1, timing=False, limits=LIMITS)))
    assert report["verdict"] == "pass", report["failure"]
