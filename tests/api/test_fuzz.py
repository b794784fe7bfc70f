"""Schemathesis over the project's OpenAPI schema (`/api/openapi.json`: the generic `/api/` and
`/jobs`), in-process through Django's WSGI application on the test database: for every operation,
a bounded, derandomized set of generated requests (valid and invalid), each answered without a
5xx and as the schema declares it (status, content type, body, headers).

Bounded so `make test` stays fast: `MAX_EXAMPLES` per operation, a fixed seed (derandomized), no
example database. A failure prints the request that reproduces it (a curl command)."""

from __future__ import annotations

import atexit
import shutil
import tempfile

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir
from schemathesis.specs.openapi.checks import positive_data_acceptance

from workflows.http.auth import create_api_key

MAX_EXAMPLES = 15  # per operation and generation mode: about 15 s of CPU for the whole schema

# Hypothesis caches what it learns of the code (from collection on, so set at import): in a temp
# directory removed when the test process ends, never in the tree (`.hypothesis/`) nor left in /tmp.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="wf-hypothesis-")
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)
set_hypothesis_home_dir(_HYPOTHESIS_HOME)


@pytest.fixture
def fuzz_key(db) -> str:
    _row, key = create_api_key("fuzzer")
    return key


@pytest.fixture
def fuzz_schema(db, fuzz_key):
    # Django closes the database connection around each WSGI request; its test client keeps it
    # open (the test's transaction lives on it), and so does this WSGI app while the test runs.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


schema = schemathesis.pytest.from_fixture("fuzz_schema")


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation__answers_as_documented_and_never_5xx(case, fuzz_key):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {fuzz_key}"},
        # Every default check but one: the API refuses, as 422, what a schema cannot say (a queue
        # the run's workflow lacks, a body its queue's schema refuses, NUL or a lone surrogate in
        # any text), so a schema-valid request may rightly be refused.
        excluded_checks=[positive_data_acceptance],
    )
