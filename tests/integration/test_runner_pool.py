"""workflows.E013: a runner refuses to start when its connection pool cannot lend every
connection it may hold at once (its database threads for life, sync steps, async ORM calls)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from workflows import checks


def pg(**pool):
    return {"ENGINE": "django.db.backends.postgresql", "NAME": "x", "OPTIONS": {"pool": pool}}


def test_e013__a_pool_smaller_than_the_runner_needs():
    needed = checks.runner_pool_size_needed(4, 10)
    error = checks.runner_pool_too_small(4, 10, pg(min_size=1, max_size=needed - 1))
    assert error is not None and error.id == "workflows.E013"
    assert f"may hold {needed} at once" in error.msg and f"to {needed} or more" in error.hint


def test_e013__a_pool_large_enough_passes():
    needed = checks.runner_pool_size_needed(4, 10)
    assert checks.runner_pool_too_small(4, 10, pg(max_size=needed)) is None


def test_e013__psycopg_pool_defaults_lend_four():
    # `"pool": True` takes psycopg_pool's defaults: min_size 4 and max_size = min_size.
    assert checks.runner_pool_too_small(1, 1, {**pg(), "OPTIONS": {"pool": True}}) is None
    assert checks.runner_pool_too_small(4, 10, {**pg(), "OPTIONS": {"pool": True}}) is not None


def test_e013__no_pool_or_sqlite_is_never_refused():
    assert checks.runner_pool_too_small(50, 100, {**pg(), "OPTIONS": {}}) is None
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "x", "OPTIONS": {"pool": {"max_size": 1}}}
    assert checks.runner_pool_too_small(50, 100, sqlite) is None


def test_the_need__counts_db_threads_sync_steps_and_one_for_async_orm_calls():
    assert checks.runner_pool_size_needed(4, 1) == 4 + 1 + 1  # one run: at most one sync step
    assert checks.runner_pool_size_needed(2, 1000) <= 2 + 32 + 1  # asyncio's executor caps it


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the pool is PostgreSQL's")
def test_runworkflows__refuses_to_start_with_a_pool_too_small(monkeypatch):
    # The test process itself runs without a pool (tests/conftest.py): give the settings one,
    # as a runner's process has. The check refuses before anything connects.
    monkeypatch.setitem(connection.settings_dict, "OPTIONS", {"pool": {"min_size": 1, "max_size": 3}})
    with pytest.raises(CommandError, match=r"workflows\.E013"):
        call_command("runworkflows", "--db-threads", "4", "--concurrency", "4")
