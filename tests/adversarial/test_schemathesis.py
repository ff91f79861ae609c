"""Schemathesis against the live test portal: no 5xx and every response as its OpenAPI schema says.

The portal runs on a real port on loopback (pytest-django's live server) with alice's objects in it;
schemathesis reads the schema the portal serves, generates valid and invalid requests for every
operation with a fixed seed and a small number of examples, and sends them with alice's token.
No operation is excluded: each one is a subtest, and a failure names the operation and the request.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.models import issue_token
from tests.adversarial.conftest import World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

# What this suite promises: no server error, and every status, content type, header and body as
# documented. Schemathesis's other checks judge the API's design (e.g. whether a 404 for a random
# job name counts as "rejecting valid data"); the adversarial tables beside this file test that.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
MAX_EXAMPLES = 12  # ~30 operations x 12 examples x 2 modes: about a minute on a 2-core machine


def test_every_operation_answers_as_documented_and_never_5xx(
    live_server: Any, world: World, subtests: pytest.Subtests
) -> None:
    # The Python API, not schemathesis.pytest.from_fixture: that reads a pytest internal (_nodeid)
    # that pytest 9.2 no longer has. Each operation is a subtest, so a failure names it.
    api = schemathesis.openapi.from_url(f"{live_server.url}/api/schema/?format=json", timeout=30)
    operations = []
    for result in api.get_all_operations():
        assert isinstance(result, Ok), result.err()
        operations.append(result.ok())
    assert len(operations) >= 30, [op.label for op in operations]
    for operation in operations:
        # A fresh token per operation: DELETE /api/v1/auth/token revokes the one it is called with.
        headers = {"Authorization": f"Token {issue_token(world.alice).key}"}
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            with subtests.test(msg=f"{operation.label} ({mode.value})"):
                try:
                    run_examples(operation.as_strategy(generation_mode=mode), headers)
                except Unsatisfiable:
                    # Only string path parameters and no body: every request is valid, so there is
                    # nothing negative to send (the positive run above covered the operation).
                    assert mode is GenerationMode.NEGATIVE, operation.label


def run_examples(strategy: Any, headers: dict[str, str]) -> None:
    @given(case=strategy)
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,  # a fixed seed: the same requests on every run
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],  # no shrinking: the first failing request is reported
    )
    def check(case: Any) -> None:
        case.call_and_validate(headers=headers, checks=CHECKS, timeout=30)

    check()
