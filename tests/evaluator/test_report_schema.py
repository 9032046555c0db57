"""Reports match the published JSON schema, on success and on every kind of failure."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import evaluator

SCHEMA = json.loads((Path(evaluator.__file__).parent / "report.schema.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("solution", ["correct", "wrong_on_one_rank", "syntax_error", "crash"])
def test_reports_validate_against_the_schema(run_eval, solution):
    report, _ = run_eval(solution, trials=2)
    jsonschema.validate(json.loads(json.dumps(report)), SCHEMA)


def test_the_schema_rejects_an_unknown_failure_class():
    bad = {"failure_class": "mystery"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad["failure_class"], SCHEMA["$defs"]["failure_class"])
