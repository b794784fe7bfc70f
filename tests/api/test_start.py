"""POST /api/workflows/{name}/runs: start a run, idempotent by key."""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_error, counts
from workflows.models import Message, Run

URL = "/api/workflows/approval/runs"


def test_start__creates_the_run(api):
    response = api.post(URL, {"key": ["order-1"]})

    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get()
    assert body["id"] == str(run.id)
    assert body["workflow"] == "approval"
    assert body["key"] == ["order-1"]
    assert body["status"] == "pending"
    assert body["state"] == {"approved": None}
    assert body["version"] == "v1"


def test_start__same_key_returns_the_same_run(api):
    first = api.post(URL, {"key": ["order-1", "eu"]}).json()

    again = api.post(URL, {"key": ["order-1", "eu"]})

    assert again.status_code == 200
    assert again.json()["id"] == first["id"]
    assert Run.objects.count() == 1


def test_start__with_a_message_stores_it_once(api):
    body = {"key": ["order-1"], "message": {"queue": "approve", "body": {"approved": True, "by": "ann"}}}

    created = api.post(URL, body)
    repeated = api.post(URL, body)

    assert (created.status_code, repeated.status_code) == (201, 200)
    message = Message.objects.get()
    assert str(message.run_id) == created.json()["id"]
    assert (message.queue, message.body) == ("approve", {"approved": True, "by": "ann"})


def test_start__unknown_workflow_is_404(api):
    before = counts()

    response = api.post("/api/workflows/nope/runs", {"key": ["a"]})

    assert_error(response, 404, "not_found")
    assert counts() == before


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"key": []},
        {"key": "order-1"},
        {"key": ["a", 1]},
        {"key": None},
        {"key": ["a"], "extra": 1},
        {"key": ["a"], "message": {"queue": "nope", "body": {}}},
        {"key": ["a"], "message": {"queue": "approve", "body": {"approved": "maybe"}}},
        {"key": ["a"], "message": {"body": {}}},
    ],
    ids=[
        "missing-key", "empty-key", "string-key", "int-in-key", "null-key", "unknown-field",
        "unknown-queue", "body-refused-by-schema", "message-without-queue",
    ],
)  # fmt: skip
def test_start__bad_input_is_422_and_writes_nothing(api, body):
    before = counts()

    response = api.post(URL, body)

    assert_error(response, 422, "invalid_request")
    assert counts() == before


@pytest.mark.parametrize(
    "raw", ["{not json", "[1, 2]", '"key"', "null"], ids=["malformed", "array", "string", "null"]
)
def test_start__a_body_that_is_not_an_object_is_4xx(api, raw):
    before = counts()

    response = api.post(URL, raw=raw)

    assert 400 <= response.status_code < 500
    assert_error(response, response.status_code, response.json()["error"]["code"])
    assert counts() == before
