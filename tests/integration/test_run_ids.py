"""Every way the Django store creates a run gives it a time-ordered id (UUID version 7,
`workflows.core.ids`), on SQLite and PostgreSQL (whatever DATABASE_URL names): the one-statement
start, the ORM's create, a run started leased to its runner, a replaced key's new run, a run made
by the model's default."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support import now
from workflows.core.ids import created_millis
from workflows.core.new_run import NewRun
from workflows.models import Run
from workflows.storage.django import DjangoStore

pytestmark = pytest.mark.django_db(transaction=True)

START = {"workflow": "wf", "version": "v", "initial_state": {}}


def _assert_time_ordered(run_id: str, before: int) -> None:
    assert uuid.UUID(run_id).version == 7
    assert before <= created_millis(run_id) <= time.time_ns() // 1_000_000


def test_each_way_of_creating_a_run_gives_it_a_time_ordered_id():
    store = DjangoStore()
    try:
        before = time.time_ns() // 1_000_000
        started, created = store.get_or_create_run(NewRun(key=["a"], now=now(), **START))
        assert created
        _assert_time_ordered(started.id, before)

        held, created, is_held = store.get_or_create_held_run(
            NewRun(key=["b"], now=now(), **START), owner="me", lease_seconds=30
        )
        assert created and is_held
        _assert_time_ordered(held.id, before)

        replaced, created = store.start_run(
            NewRun(key=["a"], now=now(), **START), replace=True, debounce=None
        )
        assert created and replaced.id != started.id
        _assert_time_ordered(replaced.id, before)

        by_default = Run.objects.create(
            workflow="wf", key=["c"], key_text='["c"]', key_hash="c", created_at=now(), updated_at=now()
        )
        _assert_time_ordered(str(by_default.id), before)
        # Stored as written: the row read back is the record the store returned.
        assert {str(r) for r in Run.objects.values_list("id", flat=True)} >= {
            started.id,
            held.id,
            replaced.id,
        }
    finally:
        store.close()


def test_runs_created_later_sort_later_by_id_in_the_database():
    store = DjangoStore()
    try:
        made = []
        for i in range(4):
            run, _ = store.get_or_create_run(NewRun(key=[f"k{i}"], now=now(), **START))
            made.append(run.id)
            deadline = time.time_ns() // 1_000_000 + 1
            while time.time_ns() // 1_000_000 <= deadline:  # the next run falls in a later millisecond
                pass
        assert [str(i) for i in Run.objects.order_by("id").values_list("id", flat=True)] == made
    finally:
        store.close()
