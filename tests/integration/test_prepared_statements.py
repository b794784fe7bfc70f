"""The store's hot statements are prepared once per connection on PostgreSQL (and only they), still
seen by Django's query capture, and never prepared with PREPARED_STATEMENTS off."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from tests.support import a_step, now
from workflows.core.new_run import NewRun
from workflows.storage.django import DjangoStore

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's"),
]


@pytest.fixture(autouse=True)
def no_prepared_statements_yet():
    """Earlier tests on this connection prepared statements of their own: start from none (psycopg
    sees the DEALLOCATE ALL and forgets its own)."""
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")


def prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE NOT from_sql")
        return [row[0] for row in cursor.fetchall()]


def run_three_steps(store: DjangoStore, key: str) -> str:
    run, _ = store.get_or_create_run(
        NewRun(workflow="wf", key=[key], version="v", initial_state={}, now=now())
    )
    [claimed] = store.claim(owner="a", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    for position in range(3):
        store.commit(run_id=claimed.id, owner="a", commit=a_step(position), now=now())
    store.get_run(run.id)
    store.load_history(run.id)
    store.available_messages(run.id, ["start"], 10)
    return run.id


def test_hot_statements_are_prepared_once_and_reused():
    store = DjangoStore()
    run_three_steps(store, "one")
    statements = prepared()
    # a run's creation, a claim, a step's commit and a run read: each prepared once, with the
    # parameters bound on the server ($1...), whatever the number of executions
    for marker in ("INSERT INTO workflows_run", "SKIP LOCKED", "INSERT INTO workflows_attempt",
                   "FROM workflows_run WHERE id = $1", "FROM workflows_entry WHERE run_id = $1",
                   "FROM workflows_message WHERE run_id = $1"):  # fmt: skip
        matching = [s for s in statements if marker in s]
        assert len(matching) == 1, (marker, statements)
        assert "$1" in matching[0]
    run_three_steps(store, "two")
    assert sorted(prepared()) == sorted(statements)  # reused by name, not prepared again


def test_the_rest_is_never_prepared():
    store = DjangoStore()
    run_id = run_three_steps(store, "one")
    for _ in range(10):  # ORM reads, however often they repeat
        store.list_events(run_id)
    assert prepared() and not [s for s in prepared() if "workflows_event" in s]


def test_query_capture_still_sees_the_hot_statements():
    store = DjangoStore()
    store.get_or_create_run(NewRun(workflow="wf", key=["k"], version="v", initial_state={}, now=now()))
    [claimed] = store.claim(owner="a", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    with CaptureQueriesContext(connection) as captured:
        store.commit(run_id=claimed.id, owner="a", commit=a_step(0), now=now())
    assert len(captured) == 1 and "INSERT INTO workflows_entry" in captured[0]["sql"]


def test_a_rollback_between_executions_leaves_no_stale_statement():
    store = DjangoStore()
    run, _ = store.get_or_create_run(
        NewRun(workflow="wf", key=["k"], version="v", initial_state={}, now=now())
    )
    [claimed] = store.claim(owner="a", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    store.commit(run_id=claimed.id, owner="a", commit=a_step(0), now=now())
    with pytest.raises(IntegrityError), transaction.atomic():  # the same position again: refused
        store.commit(run_id=claimed.id, owner="a", commit=a_step(0), now=now())
    store.commit(run_id=claimed.id, owner="a", commit=a_step(1), now=now())
    assert [e.output for e in store.load_history(run.id)] == [0, 1]


def test_off_prepares_nothing(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "PREPARED_STATEMENTS": False}
    run_three_steps(DjangoStore(), "off")
    assert prepared() == []


def test_off_the_resume_read_still_reads_both_in_one_go(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "PREPARED_STATEMENTS": False}
    store = DjangoStore()
    run_id = run_three_steps(store, "off-resume")
    history, messages = store.load_resume(run_id)
    assert history == store.load_history(run_id) and len(history) == 3
    assert messages == []
    assert prepared() == []


def test_statements_are_parsed_once_and_an_incompatible_psycopg_falls_back():
    from psycopg import _queries

    from workflows.storage.django import prepared as prepared_module

    assert prepared_module._cursor_class()._query_cls.__name__ == "ParsedOnce"

    class Changed(_queries.PostgresQuery):  # as if a psycopg upgrade renamed what it leans on
        def convert(self, query, vars):
            raise AttributeError("_want_formats")

    assert not prepared_module._converts(Changed)
    assert prepared_module._converts(_queries.PostgresQuery)
