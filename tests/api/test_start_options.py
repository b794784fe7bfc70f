"""POST /api/workflows/{name}/runs with start options: `state`, `on_conflict="replace"` and
`debounce` (seconds)."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.api.helpers import assert_error, counts
from workflows.models import Event, Message, Run

URL = "/api/workflows/approval/runs"


def test_replace__cancels_the_live_run_and_starts_a_new_one_with_its_message(api):
    first = api.post(URL, {"key": ["order-1"]}).json()
    body = {
        "key": ["order-1"],
        "on_conflict": "replace",
        "message": {"queue": "approve", "body": {"approved": True, "by": "a"}},
    }

    replaced = api.post(URL, body)

    assert replaced.status_code == 201, replaced.content
    new_id = replaced.json()["id"]
    assert new_id != first["id"]
    old = Run.objects.get(id=first["id"])
    assert old.cancel_requested and old.key == ["order-1"]
    assert Event.objects.get(run=old).payload == {"by": new_id}
    assert str(Message.objects.get().run_id) == new_id
    assert api.get("/api/runs", {"key": ["order-1"]}).json()["items"][0]["id"] == new_id


def test_debounce__a_repeated_start_pushes_the_wake_and_replaces_the_state(api):
    created = api.post(URL, {"key": ["k"], "debounce": 30, "state": {"approved": False}})
    assert created.status_code == 201, created.content
    first_wake = dt.datetime.fromisoformat(created.json()["wake_at"])
    assert first_wake > dt.datetime.now(dt.UTC) + dt.timedelta(seconds=25)

    pushed = api.post(URL, {"key": ["k"], "debounce": 60, "state": {"approved": True}})

    assert pushed.status_code == 200 and pushed.json()["id"] == created.json()["id"]
    assert dt.datetime.fromisoformat(pushed.json()["wake_at"]) >= first_wake + dt.timedelta(seconds=29)
    assert pushed.json()["state"] == {"approved": True}
    assert Run.objects.count() == 1


@pytest.mark.parametrize(
    "extra",
    [{"on_conflict": "newest"}, {"debounce": 0}, {"debounce": -1}, {"debounce": 1e9}, {"state": [1]}],
)
def test_bad_start_options_are_422_and_store_nothing(api, extra):
    before = counts()

    response = api.post(URL, {"key": ["k"], **extra})

    assert_error(response, 422, "invalid_request")
    assert counts() == before
