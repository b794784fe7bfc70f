"""POST /api/runs/{id}/messages and /actions/{action}: talking to a run."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connections

from tests.api.helpers import assert_error, counts
from workflows.models import AuditEntry, Message, Run
from workflows.testing import run_until_idle

APPROVE = {"approved": True, "by": "ann"}


def start(api, key="order-1") -> str:
    response = api.post("/api/workflows/approval/runs", {"key": [key]})
    assert response.status_code == 201
    return response.json()["id"]


def test_send__stores_the_message_and_the_run_takes_it(api, registry):
    run_id = start(api)

    response = api.post(f"/api/runs/{run_id}/messages", {"queue": "approve", "body": APPROVE})

    assert response.status_code == 202, response.content
    message = Message.objects.get()
    assert response.json() == {"messageId": message.id}
    assert (message.queue, message.body, message.consumed_at) == ("approve", APPROVE, None)
    run_until_idle(registry)
    run = Run.objects.get()
    assert (run.status, run.state, run.result) == ("completed", {"approved": True}, APPROVE)
    assert not AuditEntry.objects.exists()  # an app's send is not an operator's


def test_send__with_reason_is_an_audited_operator_send(api):
    run_id = start(api)

    response = api.post(
        f"/api/runs/{run_id}/messages", {"queue": "approve", "body": APPROVE, "reason": "customer called"}
    )

    assert response.status_code == 202, response.content
    audit = AuditEntry.objects.get()
    assert (audit.action, audit.actor, audit.reason) == ("send", "api:tester", "customer called")
    assert audit.details == {"queue": "approve", "message": response.json()["messageId"]}


def test_send__wait_times_out_with_504_and_keeps_the_message(api):
    run_id = start(api)

    response = api.post(
        f"/api/runs/{run_id}/messages", {"queue": "approve", "body": APPROVE, "wait": True, "timeout": 0.05}
    )

    assert_error(response, 504, "timeout")
    assert Message.objects.get().consumed_at is None


@pytest.mark.django_db(transaction=True)
def test_send__wait_returns_the_runs_response(api, registry):
    """A runner in another thread (its own connection) answers while the request waits."""
    run_id = start(api)
    stop = threading.Event()
    failures: list[BaseException] = []

    def runner() -> None:
        try:
            while not stop.is_set():
                run_until_idle(registry)
                if Run.objects.filter(id=run_id, status="completed").exists():
                    return
                stop.wait(0.02)
        except BaseException as exc:  # surfaced by the assertion below
            failures.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=runner)
    thread.start()
    try:
        response = api.post(
            f"/api/runs/{run_id}/messages", {"queue": "approve", "body": APPROVE, "wait": True, "timeout": 30}
        )
    finally:
        stop.set()
        thread.join(30)

    assert not failures, failures
    assert response.status_code == 200, response.content
    message = Message.objects.get()
    assert response.json() == {"messageId": message.id, "response": {"ok": True, "approved": True}}


@pytest.mark.django_db(transaction=True)
def test_send__wait_for_a_run_that_ends_without_taking_it_is_409(api, registry):
    """The run waits on `approve` only; it completes while a `note` sender waits for an answer."""
    run_id = start(api)
    stop = threading.Event()
    failures: list[BaseException] = []

    def runner() -> None:
        try:
            while not stop.is_set() and not Message.objects.filter(queue="note").exists():
                stop.wait(0.02)
            registry.client("approval").get_by_id(run_id).send("approve", APPROVE)
            run_until_idle(registry)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=runner)
    thread.start()
    try:
        response = api.post(
            f"/api/runs/{run_id}/messages", {"queue": "note", "body": 1, "wait": True, "timeout": 30}
        )
    finally:
        stop.set()
        thread.join(30)

    assert not failures, failures
    assert_error(response, 409, "run_finished")
    assert Run.objects.get().status == "completed"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"queue": "nope", "body": 1}, 422, "invalid_request"),
        ({"queue": "approve", "body": {"approved": True}}, 422, "invalid_request"),
        ({"body": 1}, 422, "invalid_request"),
        ({"queue": "note", "wait": "soon"}, 422, "invalid_request"),
        ({"queue": "note", "wait": True, "timeout": 0}, 422, "invalid_request"),
        ({"queue": "note", "wait": True, "timeout": 3600}, 422, "invalid_request"),
        ({"queue": "note", "reason": ""}, 422, "invalid_request"),
        ({"queue": "nope", "reason": "r"}, 422, "invalid_request"),
        ({"queue": "note", "colour": "red"}, 422, "invalid_request"),
    ],
    ids=[
        "unknown-queue", "refused-by-schema", "no-queue", "wait-not-bool", "zero-timeout",
        "timeout-too-long", "empty-reason", "operator-unknown-queue", "unknown-field",
    ],
)  # fmt: skip
def test_send__bad_input_writes_nothing(api, body, status, code):
    run_id = start(api)
    before = counts()

    response = api.post(f"/api/runs/{run_id}/messages", body)

    assert_error(response, status, code)
    assert counts() == before


@pytest.mark.parametrize("reason", [None, "operator"], ids=["app", "operator"])
def test_send__to_a_finished_run_is_409(api, registry, reason):
    run_id = start(api)
    api.post(f"/api/runs/{run_id}/messages", {"queue": "approve", "body": APPROVE})
    run_until_idle(registry)
    before = counts()

    body = {"queue": "note", "body": "late"} | ({"reason": reason} if reason else {})
    response = api.post(f"/api/runs/{run_id}/messages", body)

    assert_error(response, 409, "run_finished")
    assert counts() == before


@pytest.mark.parametrize(
    "run_id", [str(uuid.uuid4()), "not-a-uuid", "1"], ids=["unknown", "malformed", "number"]
)
def test_send__unknown_run_is_404(api, run_id):
    before = counts()

    response = api.post(f"/api/runs/{run_id}/messages", {"queue": "note", "body": 1})

    assert_error(response, 404, "not_found")
    assert counts() == before


def test_action__sync_and_async_actions_answer(api, registry):
    run_id = start(api)

    state = api.post(f"/api/runs/{run_id}/actions/state")
    summary = api.post(f"/api/runs/{run_id}/actions/summary")

    assert state.status_code == 200, state.content
    assert state.json() == {"result": {"approved": None}}
    assert summary.json() == {"result": {"status": "pending", "approved": None}}


def test_action__unknown_action_is_422(api):
    run_id = start(api)

    assert_error(api.post(f"/api/runs/{run_id}/actions/nope"), 422, "invalid_request")


@pytest.mark.parametrize("run_id", [str(uuid.uuid4()), "zzz"], ids=["unknown", "malformed"])
def test_action__unknown_run_is_404(api, run_id):
    assert_error(api.post(f"/api/runs/{run_id}/actions/state"), 404, "not_found")
