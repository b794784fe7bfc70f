"""What brings a runner back soon after a partition heals: its pause after a failed claim ends
when it is woken (the LISTEN connection's reconnect wakes it), a wake that came while the failing
call was in flight included; the database away is logged in one line; the LISTEN connection
probes with keepalives at the pace of the connections' tcp_user_timeout. The partition itself is
in tests/multihost/test_partition.py."""

from __future__ import annotations

import asyncio
import logging

import pytest
from django.conf import settings

from workflows.core.exceptions import StoreUnavailable
from workflows.engine.housekeeping import pause_after_failure
from workflows.storage.django.notify import libpq_params

PG = {"NAME": "app", "HOST": "db", "PORT": "5432", "USER": "u", "PASSWORD": ""}


async def test_a_wake_set_while_the_failing_call_was_in_flight_ends_the_pause_at_once():
    wake = asyncio.Event()
    wake.set()  # the reconnect's wake came before the claim failed
    assert await asyncio.wait_for(pause_after_failure(StoreUnavailable("down"), "r1", 60.0, wake), 5)


async def test_a_wake_during_the_pause_ends_it():
    wake = asyncio.Event()
    pause = asyncio.create_task(pause_after_failure(StoreUnavailable("down"), "r1", 60.0, wake))
    await asyncio.sleep(0.05)
    assert not pause.done()
    wake.set()
    assert await asyncio.wait_for(pause, 5)


async def test_without_a_wake_the_pause_lasts_its_seconds():
    wake = asyncio.Event()
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert not await pause_after_failure(StoreUnavailable("down"), "r1", 0.2, wake)
    assert loop.time() - began >= 0.2


async def test_the_database_away_is_one_line_and_anything_else_keeps_its_traceback(caplog):
    caplog.set_level(logging.WARNING, logger="workflows.engine.runner")
    wake = asyncio.Event()
    wake.set()
    await pause_after_failure(StoreUnavailable("the database failed: timed out"), "r1", 1.0, wake)
    await pause_after_failure(ValueError("a bug"), "r1", 1.0, wake)
    away, bug = caplog.records
    assert (away.levelname, away.exc_info) == ("WARNING", None)
    assert "the database failed: timed out; retrying in 1.0s" in away.getMessage()
    assert bug.levelname == "ERROR" and bug.exc_info is not None and bug.exc_info[0] is ValueError


def test_the_listen_connection_probes_at_the_pace_of_the_tcp_user_timeout():
    params = libpq_params({**PG, "OPTIONS": {"tcp_user_timeout": 10_000, "connect_timeout": 5, "pool": {}}})
    assert params == {
        "dbname": "app", "host": "db", "port": "5432", "user": "u", "connect_timeout": 5,
        "tcp_user_timeout": 10_000, "keepalives": 1, "keepalives_idle": 3, "keepalives_interval": 3,
        "keepalives_count": 3,
    }  # fmt: skip


def test_keepalives_of_the_url_win_and_none_without_a_tcp_user_timeout():
    own = libpq_params({**PG, "OPTIONS": {"tcp_user_timeout": 2000, "keepalives": 0}})
    assert own["keepalives"] == 0 and "keepalives_idle" not in own
    assert "keepalives" not in libpq_params({**PG, "OPTIONS": {}})


@pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql", reason="PostgreSQL's option"
)
def test_postgresql_connections_get_a_tcp_user_timeout():
    assert settings.DATABASES["default"]["OPTIONS"]["tcp_user_timeout"] == 10_000
