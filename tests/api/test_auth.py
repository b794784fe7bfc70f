"""Every /api/ route needs a live API key; keys are stored only as a hash."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from tests.api.helpers import assert_error, counts
from workflows.core.exceptions import BadInput
from workflows.http.auth import check_api_key, create_api_key, revoke_api_key
from workflows.models import ApiKey

RUN = str(uuid.uuid4())
ROUTES = [
    ("post", "/api/workflows/approval/runs", {"key": ["a"]}),
    ("post", f"/api/runs/{RUN}/messages", {"queue": "note", "body": 1}),
    ("post", f"/api/runs/{RUN}/actions/state", {}),
    ("get", "/api/runs", None),
    ("get", f"/api/runs/{RUN}", None),
    ("get", f"/api/runs/{RUN}/events", None),
    ("post", f"/api/runs/{RUN}/replay", {"entry_id": 1, "reason": "r"}),
    ("post", f"/api/runs/{RUN}/entries/1/retry-now", {"reason": "r"}),
    ("post", f"/api/runs/{RUN}/cancel", {"reason": "r"}),
]


def call(client, method, path, body, headers):
    if method == "get":
        return client.get(path, headers=headers)
    return client.post(path, body, content_type="application/json", headers=headers)


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wf_not-a-key-at-all-0000000000", "Token {key}", "Bearer", "{key}", "Bearer {key}x"],
    ids=["missing", "wrong-key", "wrong-scheme", "empty", "no-scheme", "altered-key"],
)
def test_route__without_a_valid_key_is_401(client, api_key, method, path, body, authorization):
    headers = {} if authorization is None else {"Authorization": authorization.format(key=api_key)}
    before = counts()

    response = call(client, method, path, body, headers)

    assert_error(response, 401, "unauthorized")
    assert counts() == before


def test_route__revoked_key_is_401(client, api_key):
    revoke_api_key("tester")

    response = client.get("/api/runs", headers={"Authorization": f"Bearer {api_key}"})

    assert_error(response, 401, "unauthorized")


def test_route__valid_key_is_accepted(client, api_key):
    response = client.get("/api/runs", headers={"Authorization": f"Bearer {api_key}"})

    assert response.status_code == 200
    assert response.json() == {"items": [], "next_cursor": None}


def test_key__stored_only_as_a_hash(db):
    row, key = create_api_key("ci")

    stored = ApiKey.objects.filter(pk=row.pk).values().get()
    assert key not in [str(v) for v in stored.values()]
    assert stored["prefix"] == key[:8]
    assert len(stored["hashed_key"]) == 64
    assert check_api_key(key) == row


def test_key__names_are_unique(db):
    create_api_key("ci")

    with pytest.raises(BadInput):
        create_api_key("ci")


def test_key__last_use_recorded_at_most_once_a_minute(db):
    row, key = create_api_key("ci")

    check_api_key(key)
    first = ApiKey.objects.get(pk=row.pk).last_used_at
    check_api_key(key)
    assert ApiKey.objects.get(pk=row.pk).last_used_at == first

    earlier = first - dt.timedelta(seconds=61)
    ApiKey.objects.filter(pk=row.pk).update(last_used_at=earlier)
    check_api_key(key)
    assert ApiKey.objects.get(pk=row.pk).last_used_at > earlier


def test_key__request_records_its_use(client, api_key):
    assert ApiKey.objects.get().last_used_at is None

    client.get("/api/runs", headers={"Authorization": f"Bearer {api_key}"})

    assert ApiKey.objects.get().last_used_at is not None
