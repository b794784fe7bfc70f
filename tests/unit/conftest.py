"""Engine tests over the in-memory store: no database, a clock that skips ahead."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest

from workflows.core.clock import FakeClock
from workflows.engine.client import WorkflowClient
from workflows.engine.registry import Registry
from workflows.storage.memory import MemoryStore
from workflows.testing import arun_until_idle


class Counting:
    """Mixed into a store: counts its commits."""

    commits = 0

    def commit(self, **kwargs):
        self.commits += 1
        return super().commit(**kwargs)


class CountingStore(Counting, MemoryStore):
    pass


class Harness:
    """What the engine tests need of a store, besides the Store interface itself. The integration
    tests subclass it over the Django store and run the same cases on a real database."""

    def __init__(self, store, clock: FakeClock) -> None:
        self.store = store
        self.clock = clock

    def client(self, registry: Registry, name: str) -> WorkflowClient:
        return WorkflowClient(registry, name, store=self.store, clock=self.clock)

    async def run(self, registry: Registry) -> None:
        await arun_until_idle(registry, store=self.store, clock=self.clock)

    def entries(self, run_id: str):
        return {e.name: e for e in self.store.load_history(run_id)}


class MemoryHarness(Harness):
    def __init__(self) -> None:
        super().__init__(CountingStore(), FakeClock(dt.datetime(2030, 1, 1, tzinfo=dt.UTC)))

    def attempts(self, run_id: str, name: str):
        entry_id = self.entries(run_id)[name].id
        return [a for eid, a in self.store.attempts if eid == entry_id]

    def wake_early(self, run_id: str) -> None:
        self.store.runs[run_id] = replace(self.store.runs[run_id], wake_at=self.clock.now())

    def steal_lease(self, run_id: str, owner: str) -> None:
        self.store.runs[run_id] = replace(self.store.runs[run_id], lease_owner=owner)

    def message_count(self) -> int:
        return len(self.store.messages)


@pytest.fixture
def h() -> Harness:
    return MemoryHarness()
