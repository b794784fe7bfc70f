"""Requests no route should ever answer with a 500: each is a 4xx in the one error shape and
writes nothing (PostgreSQL refuses NUL characters; Django refuses oversized bodies)."""

from __future__ import annotations

import json

import pytest

from tests.api.helpers import assert_error, counts


@pytest.fixture
def run_id(api) -> str:
    return api.post("/api/workflows/approval/runs", {"key": ["a"]}).json()["id"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/workflows/approval/runs", {"key": ["a\u0000b"]}),
        (
            "/api/workflows/approval/runs",
            {"key": ["b"], "message": {"queue": "note", "body": {"x\u0000": 1}}},
        ),
        ("/api/runs/{run}/messages", {"queue": "note", "body": [{"deep": ["\u0000"]}]}),
        ("/api/runs/{run}/messages", {"queue": "note", "body": 1, "reason": "nul\u0000"}),
        ("/api/runs/{run}/cancel", {"reason": "\u0000"}),
    ],
    ids=["key", "start-message-key", "message-body", "reason", "cancel-reason"],
)
def test_nul_characters__are_422(api, run_id, path, body):
    before = counts()

    response = api.post(path.format(run=run_id), body)

    assert_error(response, 422, "invalid_request")
    assert counts() == before


def test_nul_characters__in_a_filter_are_422(api):
    assert_error(api.get("/api/runs", {"workflow": "a\u0000"}), 422, "invalid_request")


def test_oversized_body__is_413(api, run_id, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    before = counts()

    response = api.post(
        f"/api/runs/{run_id}/messages", raw=json.dumps({"queue": "note", "body": "x" * 20_000})
    )

    assert_error(response, 413, "too_large")
    assert counts() == before


def test_deeply_nested_body__is_400(api, run_id):
    before = counts()

    response = api.post(
        f"/api/runs/{run_id}/messages", raw='{"queue": "note", "body": %s}' % ("[" * 5000 + "]" * 5000)
    )

    assert_error(response, 400, "bad_request")
    assert counts() == before


def test_nan__is_422(api, run_id):
    before = counts()

    response = api.post(f"/api/runs/{run_id}/messages", raw='{"queue": "note", "body": NaN}')

    assert_error(response, 422, "invalid_request")
    assert counts() == before
