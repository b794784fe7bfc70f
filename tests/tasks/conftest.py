"""Fixtures of the `workflows.tasks` tests: the signals each test saw, and running what is due."""

from __future__ import annotations

import pytest

from workflows.tasks.framework import task_enqueued, task_finished, task_started

from . import tasks


@pytest.fixture(autouse=True)
def _fresh_calls():
    tasks.CALLS.clear()
    tasks.CONTEXTS.clear()
    yield


class Signals:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, int]] = []  # (signal, result id, status, attempts)
        self._receivers = []
        for name, signal in (
            ("enqueued", task_enqueued),
            ("started", task_started),
            ("finished", task_finished),
        ):

            def receiver(sender, task_result, name=name, **kwargs):
                self.seen.append((name, task_result.id, str(task_result.status), task_result.attempts))

            signal.connect(receiver, weak=False)
            self._receivers.append((signal, receiver))

    def of(self, result_id: str) -> list[tuple[str, str, int]]:
        return [(name, status, attempts) for name, rid, status, attempts in self.seen if rid == result_id]

    def disconnect(self) -> None:
        for signal, receiver in self._receivers:
            signal.disconnect(receiver)


@pytest.fixture
def signals():
    recorder = Signals()
    yield recorder
    recorder.disconnect()
