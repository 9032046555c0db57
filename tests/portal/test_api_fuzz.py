"""A property-based run over the OpenAPI schema (Schemathesis): requests generated from every
operation's parameters and bodies, valid and not, against the real app and database. No answer
may be a 5xx or contradict the schema (body, content type). Bounded: a few examples per
operation (PKB_FUZZ_EXAMPLES raises it for a longer run).

Operations are driven one by one through Hypothesis here rather than through Schemathesis's
pytest plugin, whose lazy fixture loading does not run under pytest 9."""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks
from schemathesis.specs.openapi import checks as openapi_checks

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.timeout(600)]
EXAMPLES = int(os.environ.get("PKB_FUZZ_EXAMPLES", "8"))
CHECKS = [checks.not_a_server_error, openapi_checks.response_schema_conformance,
          openapi_checks.content_type_conformance]


@pytest.fixture
def api_schema(all_reduce: Any, cpu_hardware: Any, settings: Any) -> Iterator[Any]:
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from portal.wsgi import application

    # Throttles would turn most generated requests into 429s: here the answers are the point.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        "anon": "100000/min", "user": "100000/min", "submit": "100000/min"}}
    # As Django's test client does: a request must not close the test's connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/", application)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_no_server_error_and_no_contradiction(api_schema: Any, owner: Any) -> None:
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=owner).key
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 12, [op.label for op in operations]
    failures: list[str] = []
    calls: dict[str, set[int]] = {}
    for operation in operations:
        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
                  database=None)
        def run(case: Any) -> None:
            headers = dict(case.headers or {})
            headers.setdefault("Authorization", f"Token {token}")
            response = case.call_and_validate(headers=headers, checks=CHECKS)
            calls.setdefault(operation.label, set()).add(response.status_code)

        try:
            run()
        except Exception as exc:  # every operation is tried; all failures are reported at once
            failures.append(f"{operation.label}: {type(exc).__name__}: {str(exc)[:1500]}")
    assert not failures, "\n\n".join(failures)
    assert len(calls) == len(operations), set(op.label for op in operations) - set(calls)
    print({label: sorted(codes) for label, codes in calls.items()})
