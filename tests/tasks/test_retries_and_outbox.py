"""Retries (max_attempts, backoff, a callable backoff) and the outbox: a task, or a workflow's
start and first message, exists iff the caller's transaction commits."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from workflows import tasks as durable
from workflows.models import Attempt, Message, Run
from workflows.tasks.framework import TaskResultStatus
from workflows.testing import run_until_idle

from . import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def run_of(result_id: str) -> Run:
    return Run.objects.get(workflow="django.task", key=[result_id])


# --- retries --------------------------------------------------------------------------------------------


def test_fails_twice_then_succeeds__two_errors_three_workers_one_return_value(signals):
    result = tasks.flaky.enqueue("k")
    run_until_idle(durable.registry)
    got = tasks.flaky.get_result(result.id)
    assert got.status == TaskResultStatus.SUCCESSFUL
    assert got.return_value == {"key": "k", "attempt": 3}
    assert [e.exception_class_path for e in got.errors] == ["tests.tasks.tasks.Flaky"] * 2
    assert got.errors[0].exception_class is tasks.Flaky
    assert "attempt 1 of k failed" in got.errors[0].traceback
    assert "attempt 2 of k failed" in got.errors[1].traceback
    assert got.attempts == 3 and len(got.worker_ids) == 3
    assert tasks.CONTEXTS == [(result.id, 1), (result.id, 2), (result.id, 3)]  # TaskContext.attempt
    assert tasks.CALLS["flaky k"] == 3
    outcomes = list(Attempt.objects.filter(entry__run=run_of(result.id)).values_list("outcome", flat=True))
    assert outcomes == ["error", "error", "ok"]
    delays = list(Attempt.objects.filter(entry__run=run_of(result.id)).values_list("delay", flat=True))
    assert delays == [0.02, 0.04, None]  # backoff 0.01: min(0.01 * 2**n, backoff_max)
    assert signals.of(result.id) == [
        ("enqueued", "READY", 0),
        ("started", "RUNNING", 1),
        ("started", "RUNNING", 2),
        ("started", "RUNNING", 3),
        ("finished", "SUCCESSFUL", 3),
    ]


def test_backoff_pair__sets_the_base_and_the_cap():
    result = tasks.always_fails.enqueue("p")
    run_until_idle(durable.registry)
    delays = list(Attempt.objects.filter(entry__run=run_of(result.id)).values_list("delay", flat=True))
    assert delays == [0.02, None]  # (0.01, 0.02): 0.01 * 2, capped at 0.02; the last is not retried


def test_callable_backoff__none_stops_the_retries(signals):
    result = tasks.gives_up_on_key_error.enqueue("g")
    run_until_idle(durable.registry)
    got = tasks.gives_up_on_key_error.get_result(result.id)
    assert got.status == TaskResultStatus.FAILED
    assert tasks.CALLS["gives_up g"] == 1  # max_attempts 4, but backoff() said no more
    assert [e.exception_class_path for e in got.errors] == ["builtins.KeyError"]
    assert "KeyError: 'g'" in got.errors[0].traceback  # the original, chained
    assert signals.of(result.id)[-1] == ("finished", "FAILED", 1)


# --- the outbox ---------------------------------------------------------------------------------------------


class Rollback(Exception):
    pass


def runs_seen_by_another_connection() -> int:
    """What a runner would see now: the runs committed, read on another connection."""
    seen = []

    def read():
        try:
            seen.append(Run.objects.count())
        finally:
            connection.close()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join(30)
    return seen[0]


def test_outbox__a_task_enqueued_in_a_rolled_back_transaction_never_exists(signals):
    with pytest.raises(Rollback), transaction.atomic():
        result = tasks.add.enqueue(1, 2)
        assert run_of(result.id)  # in the transaction
        raise Rollback
    assert not Run.objects.exists()
    run_until_idle(durable.registry)
    assert tasks.CALLS["add 1"] == 0
    with pytest.raises(Exception, match=result.id):
        tasks.add.get_result(result.id)


def test_outbox__a_task_enqueued_in_a_transaction_exists_once_it_commits():
    with transaction.atomic():
        result = tasks.add.enqueue(3, 4)
        assert runs_seen_by_another_connection() == 0  # a runner cannot take it yet
    assert runs_seen_by_another_connection() == 1
    run_until_idle(durable.registry)
    assert tasks.add.get_result(result.id).return_value == 7


def test_outbox__a_workflows_get_or_create_and_send_roll_back_together():
    client = tasks.inbox.client("tasks_test_inbox")
    with pytest.raises(Rollback), transaction.atomic():
        handle = client.get_or_create(["order-1"])
        handle.send("start", {"order": 1})
        assert Run.objects.count() == 1 and Message.objects.count() == 1
        assert runs_seen_by_another_connection() == 0
        raise Rollback
    assert not Run.objects.exists() and not Message.objects.exists()
    with transaction.atomic():
        handle = client.get_or_create(["order-1"])
        handle.send("start", {"order": 1})
    run_until_idle(tasks.inbox)
    assert handle.info().status == "completed" and handle.info().result == {"order": 1}
