"""Operators' repairs over the API: replay, retry now, cancel; each writes its AuditEntry."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from asgiref.sync import async_to_sync

from tests.api import flows
from tests.api.helpers import assert_error, counts
from workflows import conf
from workflows.engine.runner import Runner
from workflows.models import AuditEntry, Entry, Message, Run
from workflows.testing import run_until_idle


def start(api, workflow="flaky", key="k") -> str:
    response = api.post(f"/api/workflows/{workflow}/runs", {"key": [key]})
    assert response.status_code == 201
    return response.json()["id"]


def one_round(registry) -> None:
    """One runner pass with the real clock: a retry backoff is really waited for."""
    async_to_sync(Runner(registry=registry, store=conf.default_store(), watch=False).run_due)()


@pytest.fixture
def failed_run(api, registry) -> str:
    flows.FAILURES.update(check=1)
    run_id = start(api)
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).status == "failed"
    return run_id


def test_replay__reruns_from_the_step_and_audits(api, registry, failed_run):
    check = Entry.objects.get(run_id=failed_run, name="check")

    response = api.post(f"/api/runs/{failed_run}/replay", {"entry_id": check.id, "reason": "bug fixed"})

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "pending"
    audit = AuditEntry.objects.get()
    assert (audit.action, audit.actor, audit.reason) == ("replay", "api:tester", "bug fixed")
    assert audit.details["from_entry"] == check.id
    run_until_idle(registry)
    assert Run.objects.get(id=failed_run).status == "completed"


def test_replay__with_an_edited_input(api, registry, failed_run):
    check = Entry.objects.get(run_id=failed_run, name="check")

    response = api.post(
        f"/api/runs/{failed_run}/replay", {"entry_id": check.id, "reason": "typo", "input": {"n": 2}}
    )

    assert response.status_code == 200, response.content
    run_until_idle(registry)
    current = Entry.objects.get(run_id=failed_run, name="check", superseded=False)
    assert current.input == {"n": 2} and current.status == "completed"
    assert AuditEntry.objects.get().details["input"] == {"n": 2}


@pytest.mark.parametrize(
    "body",
    [{"entry_id": 999999, "reason": "r"}, {"entry_id": 0, "reason": "r"}, {"entry_id": 2**63, "reason": "r"},
     {"entry_id": "one", "reason": "r"}, {"reason": "r"}, {"entry_id": "{check}"}, {"entry_id": "{check}", "reason": ""},
     {"entry_id": "{check}", "reason": "r", "force": True}],
    ids=["unknown-entry", "zero", "too-big", "text", "no-entry", "no-reason", "empty-reason", "unknown-field"],
)  # fmt: skip
def test_replay__bad_input_is_422_and_writes_nothing(api, failed_run, body):
    check = Entry.objects.get(run_id=failed_run, name="check")
    body = {k: (check.id if v == "{check}" else v) for k, v in body.items()}
    before = counts()

    response = api.post(f"/api/runs/{failed_run}/replay", body)

    assert_error(response, 422, "invalid_request")
    assert counts() == before
    assert Run.objects.get(id=failed_run).status == "failed"


def test_replay__an_entry_of_another_run_is_422(api, registry, failed_run):
    other = start(api, key="other")
    run_until_idle(registry)
    foreign = Entry.objects.get(run_id=other, name="check")
    before = counts()

    response = api.post(f"/api/runs/{failed_run}/replay", {"entry_id": foreign.id, "reason": "r"})

    assert_error(response, 422, "invalid_request")
    assert counts() == before


def approved_run(api, registry) -> tuple[str, Entry]:
    run_id = start(api, workflow="approval")
    api.post(f"/api/runs/{run_id}/messages", {"queue": "approve", "body": {"approved": True, "by": "ann"}})
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).status == "completed"
    return run_id, Entry.objects.get(run_id=run_id, name="wait-approval")


def test_replay__from_a_wait_delivers_its_message_again(api, registry):
    run_id, wait = approved_run(api, registry)
    (message,) = Message.objects.filter(run_id=run_id)

    response = api.post(f"/api/runs/{run_id}/replay", {"entry_id": wait.id, "reason": "record again"})

    assert response.status_code == 200, response.content
    assert AuditEntry.objects.get().details["redelivered"] == [{"id": message.id, "queue": "approve"}]
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).status == "completed"
    again = Entry.objects.get(run_id=run_id, name="wait-approval", superseded=False)
    assert Message.objects.get(id=message.id).consumed_by_id == again.id != wait.id


def test_replay__redeliver_false_waits_for_a_new_message(api, registry):
    run_id, wait = approved_run(api, registry)

    response = api.post(
        f"/api/runs/{run_id}/replay", {"entry_id": wait.id, "reason": "ask again", "redeliver": False}
    )

    assert response.status_code == 200, response.content
    assert AuditEntry.objects.get().details["redelivered"] == []
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).status == "waiting"
    api.post(f"/api/runs/{run_id}/messages", {"queue": "approve", "body": {"approved": False, "by": "bo"}})
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).result == {"approved": False, "by": "bo"}


def test_retry_now__makes_the_retry_due_and_audits(api, registry):
    flows.FAILURES.update(fetch=1)
    run_id = start(api)
    one_round(registry)
    fetch = Entry.objects.get(run_id=run_id, name="fetch")
    assert fetch.status == "retrying" and fetch.wake_at > dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)

    response = api.post(f"/api/runs/{run_id}/entries/{fetch.id}/retry-now", {"reason": "upstream is back"})

    assert response.status_code == 200, response.content
    audit = AuditEntry.objects.get()
    assert (audit.action, audit.actor, audit.reason) == ("retry_now", "api:tester", "upstream is back")
    one_round(registry)  # the real clock: due now, not in 60 s
    assert Run.objects.get(id=run_id).status == "completed"


@pytest.mark.parametrize(
    ("entry", "body"),
    [("999999", {"reason": "r"}), ("fetch", {}), ("fetch", {"reason": ""}),
     ("0", {"reason": "r"}), ("abc", {"reason": "r"})],
    ids=["unknown-entry", "no-reason", "empty-reason", "zero", "text"],
)  # fmt: skip
def test_retry_now__bad_input_is_422_and_writes_nothing(api, registry, entry, body):
    flows.FAILURES.update(fetch=1)
    run_id = start(api)
    one_round(registry)  # fetch waits to retry: the repair applies, the request is what is wrong
    entry_id = Entry.objects.get(run_id=run_id, name="fetch").id if entry == "fetch" else entry
    before = counts()

    response = api.post(f"/api/runs/{run_id}/entries/{entry_id}/retry-now", body)

    assert_error(response, 422, "invalid_request")
    assert counts() == before


def test_cancel__ends_a_waiting_run_and_audits(api, registry):
    run_id = start(api, workflow="approval")
    run_until_idle(registry)

    response = api.post(f"/api/runs/{run_id}/cancel", {"reason": "order withdrawn"})

    assert response.status_code == 200, response.content
    assert response.json()["cancel_requested"] is True
    audit = AuditEntry.objects.get()
    assert (audit.action, audit.actor, audit.reason) == ("cancel", "api:tester", "order withdrawn")
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).status == "cancelled"


@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": 5}], ids=["missing", "empty", "number"])
def test_cancel__without_a_reason_is_422(api, body):
    run_id = start(api, workflow="approval")
    before = counts()

    assert_error(api.post(f"/api/runs/{run_id}/cancel", body), 422, "invalid_request")
    assert counts() == before


def test_cancel__a_finished_run_is_409_not_applicable(api, registry):
    run_id = start(api)
    run_until_idle(registry)
    before = counts()

    response = api.post(f"/api/runs/{run_id}/cancel", {"reason": "r"})
    assert_error(response, 409, "not_applicable")
    assert counts() == before


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("replay", {"entry_id": 1, "reason": "r"}),
        ("entries/1/retry-now", {"reason": "r"}),
        ("cancel", {"reason": "r"}),
    ],
    ids=["replay", "retry-now", "cancel"],
)
@pytest.mark.parametrize("run_id", [str(uuid.uuid4()), "not-a-uuid"], ids=["unknown", "malformed"])
def test_operator_routes__unknown_run_is_404(api, path, body, run_id):
    before = counts()

    assert_error(api.post(f"/api/runs/{run_id}/{path}", body), 404, "not_found")
    assert counts() == before
