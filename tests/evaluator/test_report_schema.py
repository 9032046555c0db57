"""Reports match the published JSON schema, on success and on every kind of failure."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import evaluator

from .conftest import shared

SCHEMA = json.loads((Path(evaluator.__file__).parent / "report.schema.json").read_text())


@pytest.mark.slow
# Unconfined, make test validates the pass (its report says "sandbox": "off"); the failures' reports
# have the same shape either way, and make test-long validates them unconfined too.
# Each report is the one test_verdicts.py judges (shared_eval: one evaluation for both tests).
@pytest.mark.parametrize("solution", [
    pytest.param("correct", marks=shared("correct")),
    *(pytest.param(s, marks=[pytest.mark.unconfined_in_long, shared(group)])
      for s, group in (("wrong_on_one_rank", "wrong-on-one-rank"), ("syntax_error", "syntax-error"),
                       ("crash", "failures")))])
def test_reports_validate_against_the_schema(shared_eval, solution):
    report, _ = shared_eval(solution)
    jsonschema.validate(json.loads(json.dumps(report)), SCHEMA)


def test_the_schema_rejects_an_unknown_failure_class():
    bad = {"failure_class": "mystery"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad["failure_class"], SCHEMA["$defs"]["failure_class"])


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[2] / "docs" / "results").rglob("*.json"))
                         + [Path(__file__).resolve().parents[1] / "portal" / "data" / "report_all_reduce_pass.json"])
def test_older_reports_stay_valid(path):
    data = json.loads(path.read_text())
    for report in data.get("reports", [data]):  # docs/results wrap theirs with provenance
        assert report["schema_version"] in SCHEMA["properties"]["schema_version"]["enum"]
        jsonschema.validate(report, SCHEMA)


def test_an_output_judged_against_the_exact_answer_validates():
    check = {"index": 0, "status": "value_mismatch", "shape": [4], "expected_shape": [4], "dtype": "bfloat16",
             "expected_dtype": "bfloat16", "max_abs_err": 0.2, "max_rel_err": 0.1, "mismatched": 0, "numel": 4,
             "judged_against": "exact", "candidate_err": {"max_abs": 0.2, "rms": 0.05},
             "reference_err": {"max_abs": 0.02, "rms": 0.005}, "allowed_err": {"max_abs": 0.04, "rms": 0.00625},
             "rule": {"rms_multiple": 1.25, "max_multiple": 2.0, "ulp_allowance": 0.0}, "no_exact_answer": None}
    jsonschema.validate(check, {**SCHEMA["$defs"]["output_check"], "$defs": SCHEMA["$defs"]})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**check, "judged_against": "oracle"}, {**SCHEMA["$defs"]["output_check"], "$defs": SCHEMA["$defs"]})
