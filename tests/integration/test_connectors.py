"""A Django store's connector (`workflows.storage.django.connectors`): chosen once when the store
is built, by default from the database and whether it has database threads; WORKFLOWS["CONNECTOR"]
names another for a runner's store (a bad name is an error, at `manage.py check` and at build);
the switches it replaced are retired (a warning, and ignored)."""

from __future__ import annotations

import asyncio

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.test import override_settings

from tests.support import a_step, now
from workflows import checks
from workflows.core.new_run import NewRun
from workflows.models import Entry
from workflows.storage.django import DjangoStore
from workflows.storage.django.async_commits import AsyncCommits
from workflows.storage.django.connectors import DjangoThread, PostgresThreads, Threads, pipelines
from workflows.storage.django.group_commit import GroupCommits
from workflows.storage.django.loop_connectors import PostgresLoop, SqliteLoop

PG = connection.vendor == "postgresql"
OTHER_DATABASES = "sqlite-loop" if PG else "postgres-loop"  # a connector for the other database
SERVED_HERE = ["postgres-loop", "postgres-threads", "threads"] if PG else ["sqlite-loop", "threads"]


def built(**kwargs):
    """The connector of a store built so (closed at once: nothing here uses it)."""
    store = DjangoStore(**kwargs)
    store.close()
    return store.connector


def runner_connector(name: str):
    with override_settings(WORKFLOWS={"REGISTRIES": [], "CONNECTOR": name}):
        return built(db_threads=2)


def test_a_store_without_database_threads_uses_djangos_thread_whatever_the_setting_says():
    assert type(built()) is DjangoThread
    with override_settings(WORKFLOWS={"REGISTRIES": [], "CONNECTOR": "threads"}):
        assert type(built()) is DjangoThread


def test_a_runners_store_on_postgresql_sends_from_its_event_loop_by_default():
    if not PG:
        pytest.skip("PostgreSQL's default")
    connector = built(db_threads=2)
    assert type(connector) is PostgresLoop and connector.threads == 2
    assert isinstance(connector.group, AsyncCommits)
    assert (connector.reads is not None) == pipelines()


def test_a_runners_store_on_sqlite_writes_its_step_commits_from_its_event_loop_by_default():
    if PG:
        pytest.skip("SQLite's default")
    connector = built(db_threads=4)
    assert type(connector) is SqliteLoop and connector.threads == 1  # SQLite: one writer


@pytest.mark.parametrize(
    ("name", "expected"),
    [("auto", PostgresLoop if PG else SqliteLoop), ("threads", Threads)]
    + (
        [("postgres-loop", PostgresLoop), ("postgres-threads", PostgresThreads)]
        if PG
        else [("sqlite-loop", SqliteLoop)]
    ),
)
def test_the_setting_names_a_runners_connector(name, expected):
    connector = runner_connector(name)
    assert type(connector) is expected
    if expected is PostgresThreads:
        assert isinstance(connector.group, GroupCommits)


def test_the_setting_is_read_when_the_store_is_built_not_at_each_call():
    with override_settings(WORKFLOWS={"REGISTRIES": [], "CONNECTOR": "threads"}):
        store = DjangoStore(db_threads=1)
    try:
        assert type(store.connector) is Threads
    finally:
        store.close()


def test_a_connector_passed_to_the_store_wins_over_the_setting():
    with override_settings(WORKFLOWS={"REGISTRIES": [], "CONNECTOR": "no-such"}):
        assert type(built(db_threads=1, connector="threads")) is Threads
        assert type(built(db_threads=1, connector=Threads)) is Threads


def test_a_connector_of_threads_without_database_threads_is_refused():
    with pytest.raises(ValueError, match="needs db_threads"):
        DjangoStore(connector=Threads)


@pytest.mark.parametrize("name", ["fast", OTHER_DATABASES, 3])
def test_a_bad_connector_name_is_an_error_at_check_and_at_build(name):
    with override_settings(WORKFLOWS={"REGISTRIES": ["jobs.workflows.registry"], "CONNECTOR": name}):
        [error] = checks.check_settings()
        with pytest.raises(ImproperlyConfigured) as refused:
            DjangoStore(db_threads=1)
        with pytest.raises(SystemCheckError, match=r"workflows\.E023"):
            call_command("check", tags=[checks.TAG])
    assert error.id == "workflows.E023" and error.msg == str(refused.value)
    assert ("must be one of" in error.msg) == (name != OTHER_DATABASES)


@pytest.mark.parametrize("key", ["ASYNC_COMMITS", "GROUP_COMMIT", "ASYNC_CLAIMS"])
def test_a_retired_setting_is_a_warning_naming_what_replaces_it_and_is_ignored(key):
    with override_settings(WORKFLOWS={"REGISTRIES": ["jobs.workflows.registry"], key: False}):
        [warning] = checks.check_settings()
        connector = built(db_threads=2)
    assert warning.id == "workflows.W006" and key in warning.msg and "ignored" in warning.msg
    assert "CONNECTOR" in warning.hint
    assert type(connector) is (PostgresLoop if PG else SqliteLoop)  # as if it were not set


@pytest.mark.django_db(transaction=True)  # the store's own connections must see the rows
@pytest.mark.parametrize("name", SERVED_HERE)
def test_every_connector_claims_commits_and_resumes(name):
    DjangoStore().get_or_create_run(
        NewRun(workflow="wf", key=["k"], version="v", initial_state={}, now=now())
    )
    store = DjangoStore(db_threads=2, connector=name)

    async def go():
        [run] = await store.aclaim(owner="a", workflows=["wf"], limit=1, lease_seconds=30, now=now())
        for position in range(2):
            await store.acommit(run_id=run.id, owner="a", commit=a_step(position), now=now())
        history, _messages = await store.aload_resume(run.id)
        return run.id, [entry.position for entry in history]

    try:
        run_id, positions = asyncio.run(go())
    finally:
        store.close()
    assert positions == [0, 1]
    assert Entry.objects.filter(run_id=run_id).count() == 2
