"""A real `runworkflows` process serving `workflows.tasks.registry`, SIGKILLed while a task runs:
another runner takes the run once the lease lapses and the task completes exactly once."""

from __future__ import annotations

import signal

import pytest

from tests.acceptance.conftest import Runners
from tests.support import wait_for
from workflows.models import Entry, Run
from workflows.tasks.framework import TaskResultStatus

from . import tasks


class TaskRunners(Runners):
    def env(self) -> dict[str, str]:
        return {**super().env(), "WORKFLOWS_REGISTRIES": "workflows.tasks.registry"}


@pytest.fixture
def task_runners(transactional_db, tmp_path):
    group = TaskRunners(tmp_path)
    yield group
    group.stop_all()


def status(result_id: str) -> TaskResultStatus:
    return tasks.blocking.get_result(result_id).status


def test_runner_killed_during_a_task__another_runner_completes_it_exactly_once(task_runners):
    result = tasks.blocking.enqueue("t1")
    first = task_runners.start()
    wait_for(lambda: task_runners.ledger()["t1 start"] == 1, what="the runner to start the task")
    assert status(result.id) == TaskResultStatus.RUNNING
    first.kill()
    first.wait(10)
    assert status(result.id) == TaskResultStatus.RUNNING  # held by a dead runner until its lease lapses
    (task_runners.workdir / "release").touch()
    second = task_runners.start()
    wait_for(
        lambda: status(result.id) == TaskResultStatus.SUCCESSFUL,
        timeout=60,
        what="the task to complete after the restart",
    )
    ledger = task_runners.ledger()
    assert ledger["t1 start"] == 2  # at least once: the cut attempt ran again
    assert ledger["t1 end"] == 1  # ... and the task completed exactly once
    got = tasks.blocking.get_result(result.id)
    assert got.return_value == "t1 done" and got.errors == [] and got.attempts == 1
    run = Run.objects.get(workflow="django.task", key=[result.id])
    assert [a.outcome for e in Entry.objects.filter(run=run) for a in e.attempt_history()] == ["ok"]
    second.send_signal(signal.SIGTERM)
    assert second.wait(20) == 0
