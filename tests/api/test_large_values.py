"""Values over WORKFLOWS["MAX_VALUE_BYTES"] over HTTP: 413 in the one error shape, naming the
queue and the size, and nothing written (a start with its message writes no run either)."""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_error, counts
from workflows.models import Message, Run

LIMIT = 2000


@pytest.fixture(autouse=True)
def small_limit(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VALUE_BYTES": LIMIT}


def big() -> str:
    return "x" * LIMIT  # LIMIT + 2 bytes as JSON


@pytest.fixture
def run_id(api) -> str:
    return api.post("/api/workflows/approval/runs", {"key": ["a"]}).json()["id"]


def test_send__a_body_over_the_limit_is_413_and_stores_nothing(api, run_id):
    before = counts()
    response = api.post(f"/api/runs/{run_id}/messages", {"queue": "note", "body": {"doc": big()}})
    error = assert_error(response, 413, "too_large")
    assert "queue approval.note" in error["message"] and "over the limit of 2,000 bytes" in error["message"]
    assert error["detail"] == {"size": LIMIT + 10, "limit": LIMIT}  # {"doc":"…"}
    assert counts() == before


def test_send__an_operators_body_over_the_limit_is_413_and_audits_nothing(api, run_id):
    before = counts()
    response = api.post(f"/api/runs/{run_id}/messages", {"queue": "note", "body": big(), "reason": "ops"})
    assert_error(response, 413, "too_large")
    assert counts() == before


def test_start__a_first_message_over_the_limit_is_413_and_creates_no_run(api):
    before = counts()
    response = api.post(
        "/api/workflows/approval/runs", {"key": ["b"], "message": {"queue": "note", "body": big()}}
    )
    assert_error(response, 413, "too_large")
    assert counts() == before
    assert not Run.objects.filter(key_text='["b"]').exists()


def test_send__just_under_the_limit_is_stored(api, run_id):
    body = "y" * (LIMIT - 2)
    response = api.post(f"/api/runs/{run_id}/messages", {"queue": "note", "body": body})
    assert response.status_code == 202, response.content
    assert Message.objects.get(run_id=run_id, queue="note").body == body


def test_the_413_is_documented_on_the_doors_that_take_values(api):
    schema = api.get("/api/openapi.json").json()
    for path in ("/api/runs/{run_id}/messages", "/api/workflows/{name}/runs", "/api/runs/{run_id}/replay"):
        assert "413" in schema["paths"][path]["post"]["responses"], path
