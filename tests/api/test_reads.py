"""GET /api/runs, /api/runs/{id} and /api/runs/{id}/events."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from tests.api import flows
from tests.api.helpers import assert_error
from workflows.models import Event, Run
from workflows.testing import run_until_idle


def start(api, workflow="approval", key="k") -> str:
    response = api.post(f"/api/workflows/{workflow}/runs", {"key": [key]})
    assert response.status_code == 201
    return response.json()["id"]


def pages(api, params, *, between=None) -> list[list[str]]:
    """Every page's run ids, following next_cursor; `between(n)` runs after page n."""
    result, cursor = [], None
    while True:
        response = api.get("/api/runs", {**params, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.content
        body = response.json()
        result.append([item["id"] for item in body["items"]])
        cursor = body["next_cursor"]
        if cursor is None:
            return result
        if between:
            between(len(result))


def test_list__newest_first_without_state(api):
    ids = [start(api, key=f"k{i}") for i in range(3)]

    body = api.get("/api/runs").json()

    assert [item["id"] for item in body["items"]] == ids[::-1]
    assert body["next_cursor"] is None
    assert "state" not in body["items"][0] and body["items"][0]["key"] == ["k2"]


def test_list__pages_are_stable_while_runs_are_created(api):
    ids = [start(api, key=f"k{i}") for i in range(7)]
    # Ties on created_at are ordered by id, so they page without loss or repeat too.
    tie = Run.objects.get(id=ids[3]).created_at
    Run.objects.filter(id__in=ids[2:5]).update(created_at=tie)
    expected = list(Run.objects.order_by("-created_at", "-id").values_list("id", flat=True))
    created = []

    seen = pages(api, {"limit": 2}, between=lambda n: created.append(start(api, key=f"new{n}")))

    assert [len(p) for p in seen] == [2, 2, 2, 1]
    assert [uuid.UUID(i) for p in seen for i in p] == expected
    assert len(created) == 3 and not set(created) & {i for p in seen for i in p}


def test_list__filters(api, registry):
    a1, a2 = start(api, key="a1"), start(api, key="a2")
    f1 = start(api, workflow="flaky", key="f1")
    run_until_idle(registry)  # flaky completes; approvals wait for their message
    Run.objects.filter(id=a1).update(created_at=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))

    def ids(**params):
        response = api.get("/api/runs", params)
        assert response.status_code == 200, response.content
        return {item["id"] for item in response.json()["items"]}

    assert ids(workflow="approval") == {a1, a2}
    assert ids(workflow="nope") == set()
    assert ids(status="completed") == {f1}
    assert ids(status="waiting") == {a1, a2}
    assert ids(key="a2") == {a2}
    assert ids(workflow="flaky", key="a2") == set()
    assert ids(created_before="2021-01-01T00:00:00Z") == {a1}
    assert ids(created_after="2021-01-01T00:00:00") == {a2, f1}  # no offset: UTC


@pytest.mark.parametrize(
    "params",
    [{"status": "sleeping"}, {"limit": 0}, {"limit": 201}, {"limit": "x"}, {"cursor": "garbage!"},
     {"cursor": "WzFd"}, {"created_after": "yesterday"}, {"created_after": "0001-01-01T00:00:00+14:00"},
     {"created_before": "9999-12-31T23:59:59-14:00"},
     {"cursor": "WyIwMDAxLTAxLTAxVDAwOjAwOjAwKzE0OjAwIiwgIjAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwIl0"}],
    ids=["status", "limit-0", "limit-201", "limit-text", "cursor", "cursor-shape", "time", "time-underflow",
         "time-overflow", "cursor-time-underflow"],
)  # fmt: skip
def test_list__bad_filters_are_422(api, params):
    assert_error(api.get("/api/runs", params), 422, "invalid_request")


def test_detail__steps_with_attempts_and_superseded_history(api, registry):
    flows.FAILURES.update(fetch=1, check=1)
    run_id = start(api, workflow="flaky")
    run_until_idle(registry)  # fetch fails once then succeeds; check fails for good
    check = Run.objects.get(id=run_id).entries.get(name="check")
    api.post(f"/api/runs/{run_id}/replay", {"entry_id": check.id, "reason": "fixed"})
    run_until_idle(registry)

    response = api.get(f"/api/runs/{run_id}")

    assert response.status_code == 200, response.content
    run = response.json()
    assert run["status"] == "completed"
    assert run["result"] == {"fetched": {"n": 1}, "checked": "checked"}
    steps = [(s["name"], s["status"], s["superseded"], s["attempt_count"]) for s in run["steps"]]
    assert steps == [
        ("fetch", "completed", False, 2),
        ("check", "failed", True, 1),
        ("check", "completed", False, 1),
    ]
    fetch, old_check = run["steps"][0], run["steps"][1]
    assert [a["outcome"] for a in fetch["attempts"]] == ["error", "ok"]
    failed = fetch["attempts"][0]
    assert failed["number"] == 1 and failed["delay"] == 60.0
    assert failed["error"]["name"] == "RuntimeError" and "upstream said 503" in failed["error"]["traceback"]
    assert failed["started_at"] and failed["finished_at"] and failed["retry_at"]
    assert old_check["attempts"][0]["outcome"] == "critical"
    assert old_check["input"] == {"n": 1}


@pytest.mark.parametrize("run_id", [str(uuid.uuid4()), "not-a-uuid"], ids=["unknown", "malformed"])
def test_detail__unknown_run_is_404(api, run_id):
    assert_error(api.get(f"/api/runs/{run_id}"), 404, "not_found")


def test_events__after_a_cursor(api, registry):
    run_id = start(api)
    other = start(api, key="other")
    run = Run.objects.get(id=run_id)
    now = dt.datetime.now(dt.UTC)
    made = [
        Event.objects.create(run=run, name="progress", payload={"i": i}, created_at=now) for i in range(5)
    ]
    Event.objects.create(run_id=other, name="progress", payload={}, created_at=now)

    first = api.get(f"/api/runs/{run_id}/events", {"limit": 3}).json()
    rest = api.get(f"/api/runs/{run_id}/events", {"after": first["next_after"]}).json()
    empty = api.get(f"/api/runs/{run_id}/events", {"after": rest["next_after"]}).json()

    assert [e["data"] for e in first["items"]] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert first["items"][0] == {
        "id": made[0].id, "event": "progress", "data": {"i": 0}, "created_at": first["items"][0]["created_at"],
        "step": None, "attempt": None, "lost": False,
    }  # fmt: skip
    assert first["next_after"] == made[2].id
    assert [e["id"] for e in rest["items"]] == [made[3].id, made[4].id]
    assert empty == {"items": [], "next_after": made[4].id}


def test_events__broadcast_by_a_step_are_listed(api, registry):
    run_id = start(api)
    api.post(f"/api/runs/{run_id}/messages", {"queue": "approve", "body": {"approved": False, "by": "bo"}})
    run_until_idle(registry)

    items = api.get(f"/api/runs/{run_id}/events").json()["items"]

    assert [(e["event"], e["data"]) for e in items] == [("progress", {"stage": "rejected"})]


@pytest.mark.parametrize(
    ("run_id", "params", "status"),
    [(str(uuid.uuid4()), {}, 404), ("nope", {}, 404), (None, {"after": -1}, 422), (None, {"limit": 500}, 422),
     (None, {"after": "x"}, 422)],
    ids=["unknown", "malformed", "negative-after", "limit", "after-text"],
)  # fmt: skip
def test_events__bad_requests(api, run_id, params, status):
    run_id = run_id or start(api)

    response = api.get(f"/api/runs/{run_id}/events", params)

    assert_error(response, status, "not_found" if status == 404 else "invalid_request")
