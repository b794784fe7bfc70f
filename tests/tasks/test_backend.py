"""The DurableBackend's side of the django.tasks contract: enqueue, results, statuses, signals,
deferral, async tasks, and bad task definitions refused with the framework's own errors. The
runner is `run_until_idle` over `workflows.tasks.registry` (its clock skips sleeps and backoff).
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import override_settings

from tests.tracing_support import tracing
from workflows import tasks as durable
from workflows.models import Entry, Run
from workflows.storage.django import DjangoStore
from workflows.tasks.framework import (
    InvalidTaskBackendError,
    InvalidTaskError,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    task,
    task_backends,
)
from workflows.testing import arun_until_idle, run_until_idle

from . import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def run_tasks(**options):
    return run_until_idle(durable.registry, **options)


def run_of(result_id: str) -> Run:
    return Run.objects.get(workflow="django.task", key=[result_id])


# --- the backend and the built-in workflow -----------------------------------------------------------


def test_backend__is_configured_with_its_feature_flags():
    backend = task_backends["default"]
    assert isinstance(backend, durable.DurableBackend)
    assert backend.supports_defer and backend.supports_async_task and backend.supports_get_result
    assert backend.supports_priority  # a task's priority is its run's
    assert durable.durable_backend_configured()
    assert durable.registry.names() == ["django.task"]


def test_enqueue__records_a_run_keyed_by_the_result_id_with_the_task_as_its_input():
    result = tasks.add.enqueue(2, b=3)
    assert result.status == TaskResultStatus.READY and result.enqueued_at is not None
    assert (result.args, result.kwargs, result.backend) == ([2], {"b": 3}, "default")
    run = run_of(result.id)
    assert run.status == "pending"
    assert run.state["task"] == "tests.tasks.tasks.add"
    assert (run.state["args"], run.state["kwargs"], run.state["queue_name"]) == ([2], {"b": 3}, "default")
    assert run.state["retry"] == {"max_attempts": 1, "backoff": 1.0, "backoff_max": 300.0, "timeout": None}
    assert tasks.CALLS["add 2"] == 0  # nothing runs until a runner does


def test_run__one_recorded_step_calls_the_task_once_and_the_result_is_successful():
    result = tasks.add.enqueue(2, 3)
    run_tasks()
    got = tasks.add.get_result(result.id)
    assert got.status == TaskResultStatus.SUCCESSFUL and got.return_value == 5
    assert got.errors == [] and len(got.worker_ids) == 1 and got.attempts == 1
    assert got.enqueued_at <= got.started_at <= got.last_attempted_at <= got.finished_at
    assert tasks.CALLS["add 2"] == 1
    [entry] = Entry.objects.filter(run__id=run_of(result.id).id)
    assert (entry.kind, entry.name, entry.output) == ("step", "tests.tasks.tasks.add", 5)
    assert entry.input["args"] == [2, 3] and entry.meta == {"worker_id": got.worker_ids[0]}
    run_tasks()
    assert tasks.CALLS["add 2"] == 1  # recorded: never again


def test_refresh__follows_the_run():
    result = tasks.add.enqueue(1, 1)
    run_tasks()
    assert result.status == TaskResultStatus.READY
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 2


def test_get_result__unknown_ids_and_other_tasks_are_refused():
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result("no-such-result")
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result("")
    result = tasks.add.enqueue(1, 2)
    with pytest.raises(TaskResultMismatch):
        tasks.divide.get_result(result.id)


def test_status__running_while_the_task_runs():
    result = tasks.my_status.enqueue()
    run_tasks()
    assert tasks.my_status.get_result(result.id).return_value == "RUNNING"


def test_status__failed_after_the_last_attempt_with_one_error_per_attempt(signals):
    result = tasks.always_fails.enqueue("x")
    run_tasks()
    got = tasks.always_fails.get_result(result.id)
    assert got.status == TaskResultStatus.FAILED and run_of(result.id).status == "failed"
    assert [e.exception_class_path for e in got.errors] == ["builtins.ValueError"] * 2
    assert got.errors[0].exception_class is ValueError
    assert "ValueError: x is broken" in got.errors[-1].traceback
    assert len(got.worker_ids) == 2 and got.finished_at is not None
    with pytest.raises(ValueError, match="Task failed"):
        got.return_value  # noqa: B018
    assert tasks.CALLS["always_fails x"] == 2
    assert signals.of(result.id) == [
        ("enqueued", "READY", 0),
        ("started", "RUNNING", 1),
        ("started", "RUNNING", 2),
        ("finished", "FAILED", 2),
    ]


def test_status__ready_until_run_after_then_runs_after_it():
    when = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    result = tasks.add.using(run_after=when).enqueue(4, 4)
    assert result.task.run_after == when
    clock = run_tasks(advance=False)  # what is due now: the run sleeps
    assert run_of(result.id).status == "waiting"
    assert tasks.add.get_result(result.id).status == TaskResultStatus.READY
    run_tasks(clock=clock)  # the test clock skips to the wake
    got = tasks.add.get_result(result.id)
    assert got.status == TaskResultStatus.SUCCESSFUL and got.return_value == 8
    assert got.started_at >= when and got.task.run_after == when
    assert [e.kind for e in Entry.objects.filter(run__id=run_of(result.id).id).order_by("position")] == [
        "sleep",
        "step",
    ]


def test_status__a_cancelled_run_is_a_failed_task():
    result = tasks.add.using(run_after=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).enqueue(1, 0)
    run_tasks(advance=False)
    durable.registry.client("django.task").get([result.id]).cancel()
    run_tasks(advance=False)
    assert tasks.add.get_result(result.id).status == TaskResultStatus.FAILED
    assert tasks.CALLS["add 1"] == 0


# --- signals -------------------------------------------------------------------------------------------


def test_signals__enqueued_at_enqueue_started_before_the_call_finished_after_it(signals):
    result = tasks.add.enqueue(7, 1)
    assert signals.of(result.id) == [("enqueued", "READY", 0)]
    run_tasks()
    assert signals.of(result.id) == [
        ("enqueued", "READY", 0),
        ("started", "RUNNING", 1),
        ("finished", "SUCCESSFUL", 1),
    ]
    run_tasks()
    assert len(signals.of(result.id)) == 3  # a recorded task is never started again


# --- async tasks ---------------------------------------------------------------------------------------


async def test_async_task__aenqueue_runs_the_coroutine_and_aget_result_reads_it(signals):
    result = await tasks.async_add.aenqueue(20, 22)
    assert result.status == TaskResultStatus.READY
    await arun_until_idle(durable.registry)
    got = await tasks.async_add.aget_result(result.id)
    assert got.status == TaskResultStatus.SUCCESSFUL and got.return_value == 42
    assert tasks.CALLS["async_add 20"] == 1
    assert [name for name, _status, _n in signals.of(result.id)] == ["enqueued", "started", "finished"]
    await result.arefresh()
    assert result.return_value == 42


def test_timeout__a_slow_attempt_fails_with_task_timeout():
    result = tasks.too_slow.enqueue("t")
    run_tasks()
    got = tasks.too_slow.get_result(result.id)
    assert got.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in got.errors] == ["workflows.tasks_workflow.TaskTimeout"]
    assert issubclass(got.errors[0].exception_class, TimeoutError)


# --- the inspector's repairs work on tasks -----------------------------------------------------------------


def test_replay_with_edited_input__repairs_a_failed_task():
    from workflows import operations

    result = tasks.divide.enqueue(1, 0)
    run_tasks()
    got = tasks.divide.get_result(result.id)
    assert got.status == TaskResultStatus.FAILED
    assert got.errors[0].exception_class_path == "builtins.ZeroDivisionError"
    run = run_of(result.id)
    entry = Entry.objects.get(run=run, superseded=False)
    operations.replay_from(
        run.id, entry.id, actor="test", reason="b must not be 0", input={**entry.input, "args": [1, 4]},
        edit_input=True,
    )  # fmt: skip
    run_tasks()
    got = tasks.divide.get_result(result.id)
    assert got.status == TaskResultStatus.SUCCESSFUL and got.return_value == 0.25
    assert got.args == [1, 4]  # what it ran with
    assert len(got.errors) == 1 and len(got.worker_ids) == 2  # the replayed attempt stays history


# --- bad task definitions and arguments: the framework's own errors --------------------------------------


def test_definition__a_function_not_at_module_level_is_refused():
    with pytest.raises(InvalidTaskError, match="module level"):

        @task
        def local():
            pass


def test_priority__becomes_the_runs_priority_and_orders_the_claims():
    low = tasks.add.using(priority=-5).enqueue(1, b=1)
    plain = tasks.add.enqueue(2, b=2)
    high = tasks.add.using(priority=50).enqueue(3, b=3)
    assert [run_of(r.id).priority for r in (low, plain, high)] == [-5, 0, 50]
    assert run_of(high.id).state["priority"] == 50
    claimed = DjangoStore().claim(
        owner="t", workflows=["django.task"], limit=3, lease_seconds=30, now=dt.datetime.now(dt.UTC)
    )
    assert [r.key[0] for r in claimed] == [high.id, plain.id, low.id]


def test_definition__a_priority_out_of_range_is_refused():
    with pytest.raises(InvalidTaskError, match="priority"):
        task(priority=101)(tasks._hidden)
    with pytest.raises(InvalidTaskError, match="priority"):
        tasks.add.using(priority=-101)


def test_definition__takes_context_needs_a_context_argument():
    with pytest.raises(InvalidTaskError, match="context"):
        task(takes_context=True)(tasks._hidden)


def test_definition__run_after_must_be_aware():
    with pytest.raises(InvalidTaskError, match="aware"):
        tasks.add.using(run_after=dt.datetime(2030, 1, 1))


def test_definition__retry_options_are_checked():
    for options, message in (
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 1.5}, "max_attempts"),
        ({"backoff": "fast"}, "backoff"),
        ({"backoff": (1, 2, 3)}, "backoff"),
        ({"backoff": -1}, "backoff"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
    ):
        with pytest.raises(InvalidTaskError, match=message):
            task(**options)(tasks._hidden)
    with pytest.raises(TypeError):
        task(retries=3)(tasks._hidden)  # not an option of the task class


def test_definition__a_task_not_found_at_its_module_path_is_refused_at_enqueue():
    with pytest.raises(InvalidTaskError, match="module path"):
        tasks.renamed.enqueue(1)
    assert not Run.objects.exists()


def test_queue__must_be_one_of_the_backends_queues():
    with pytest.raises(InvalidTaskError, match="Queue 'emails' is not valid"):
        tasks.add.using(queue_name="emails")
    options = {"BACKEND": "workflows.tasks.DurableBackend", "QUEUES": ["default", "emails"]}
    with override_settings(TASKS={"default": options}):
        result = tasks.add.using(queue_name="emails").enqueue(5, 5)
        assert run_of(result.id).state["queue_name"] == "emails"
        run_tasks()
        got = tasks.add.get_result(result.id)
        assert got.task.queue_name == "emails" and got.return_value == 10


def test_args__must_be_json():
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.add.enqueue(object(), 1)
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.add.enqueue(1, b={1, 2})
    with pytest.raises(ValueError, match="not JSON"):
        tasks.add.enqueue(float("nan"), 1)
    with pytest.raises(ValueError, match="NUL"):
        tasks.add.enqueue("a\x00b", "c")
    assert not Run.objects.exists()
    result = tasks.add.enqueue((1, 2), b=[3])  # tuples become lists, as the framework does
    assert result.args == [[1, 2]] and run_of(result.id).state["args"] == [[1, 2]]


def test_options__unknown_or_bad_backend_options_are_refused():
    for options, message in (
        ({"retries": 3}, "unknown keys"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"backoff_max": -1}, "backoff_max"),
    ):
        with override_settings(
            TASKS={"default": {"BACKEND": "workflows.tasks.DurableBackend", "OPTIONS": options}}
        ):
            with pytest.raises(InvalidTaskBackendError, match=message):
                task_backends["default"]


def test_options__the_backends_are_the_defaults_of_its_tasks():
    options = {"max_attempts": 5, "backoff": (0.5, 2.0), "timeout": 9}
    with override_settings(
        TASKS={"default": {"BACKEND": "workflows.tasks.DurableBackend", "OPTIONS": options}}
    ):
        result = tasks.add.enqueue(0, 0)
        assert run_of(result.id).state["retry"] == {
            "max_attempts": 5,
            "backoff": 0.5,
            "backoff_max": 2.0,
            "timeout": 9.0,
        }
        result = tasks.flaky.enqueue("o")  # its own max_attempts and backoff win
        assert run_of(result.id).state["retry"] == {
            "max_attempts": 3,
            "backoff": 0.01,
            "backoff_max": 2.0,
            "timeout": 9.0,
        }


def test_check__quiet_when_the_runner_serves_the_task_workflow():
    with override_settings(WORKFLOWS={"REGISTRIES": ["workflows.tasks.registry"]}):
        assert [m.id for m in task_backends["default"].check()] == []


def test_signals__a_failing_task_finished_receiver_does_not_run_the_task_again():
    from workflows.tasks.framework import task_finished

    def broken(sender, task_result, **kwargs):
        raise RuntimeError("receiver bug")

    task_finished.connect(broken, weak=False)
    try:
        result = tasks.add.enqueue(9, 1)
        run_tasks()
    finally:
        task_finished.disconnect(broken)
    assert tasks.add.get_result(result.id).return_value == 10
    assert tasks.CALLS["add 9"] == 1


# --- traces --------------------------------------------------------------------------------------------


@pytest.fixture
def traced():
    yield from tracing()


def test_enqueue__traced__stores_its_producer_context_and_the_task_run_continues_it(traced):
    result = tasks.add.enqueue(2, b=3)
    [start] = traced.named("start ")
    assert start.name == "start django.task"
    run = run_of(result.id)
    assert run.trace_context["traceparent"].split("-")[2] == format(start.context.span_id, "016x")
    run_tasks(observers=[traced.observer])
    [execution] = traced.named("workflow ")
    assert execution.parent.span_id == start.context.span_id
    [step] = traced.named("step ")
    assert step.parent.span_id == execution.context.span_id
    assert step.attributes["workflows.step.outcome"] == "ok"


def test_enqueue__untraced__stores_no_context():
    result = tasks.add.enqueue(2, b=3)
    assert run_of(result.id).trace_context is None
