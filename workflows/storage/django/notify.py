"""Waking runners: every write that makes work runnable notifies, and an idle runner watches.
PostgreSQL: NOTIFY on commit and a LISTEN connection. SQLite: no notification is needed, since
`PRAGMA data_version` moves whenever another connection commits, and asking it reads no table.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.db import connection

from ...core.exceptions import StoreUnavailable
from . import values
from .statements import postgres

logger = logging.getLogger(__name__)

NOTIFY_CHANNEL = "workflows_wake"
SQLITE_POLL = 0.01  # seconds between data_version checks: an in-process call, no table read
LISTEN_RETRY = 1.0  # seconds before reconnecting a dropped LISTEN connection

# Django's OPTIONS that are libpq's connection parameters too (the rest are Django's own).
LIBPQ_OPTIONS = frozenset(
    {"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "options", "tcp_user_timeout"}
    | {"keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count"}
)
KEEPALIVE_PROBES = 3

RunSync = Callable[..., Awaitable[Any]]


def notify(cursor: Any) -> None:
    """Inside the writing transaction: PostgreSQL delivers the NOTIFY when it commits."""
    if values.pg():
        cursor.execute(postgres.NOTIFY, [NOTIFY_CHANNEL])


def notify_now() -> None:
    with connection.cursor() as cursor:
        notify(cursor)


async def watch(run_sync: RunSync, wake: Callable[[], None]) -> None:
    """Call `wake()` whenever another process may have made work runnable; runs until cancelled.
    `run_sync` runs a function in the store's database thread."""
    if await run_sync(values.pg):
        await _listen(run_sync, wake)
    else:
        await _poll_data_version(run_sync, wake)


async def _listen(run_sync: RunSync, wake: Callable[[], None]) -> None:
    import psycopg

    params = await run_sync(_libpq_params)
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(**params, autocommit=True) as conn:
                await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                wake()  # catch up with anything sent while we were not listening
                async for _notify in conn.notifies():
                    wake()
        except asyncio.CancelledError:
            raise
        except psycopg.OperationalError as exc:  # the server or the network away: expected, one line
            logger.warning("LISTEN connection failed: %s; retrying in %.0fs", exc, LISTEN_RETRY)
            await asyncio.sleep(LISTEN_RETRY)
        except Exception:
            logger.exception("LISTEN connection failed; retrying in %.0fs", LISTEN_RETRY)
            await asyncio.sleep(LISTEN_RETRY)


async def _poll_data_version(run_sync: RunSync, wake: Callable[[], None]) -> None:
    async def read() -> int | None:
        try:
            return await run_sync(_sqlite_data_version)
        except StoreUnavailable:  # e.g. locked for longer than the busy timeout: try again
            return None

    await _poll(read, wake)


async def poll_data_version_in_loop(version: Callable[[], int | None], wake: Callable[[], None]) -> None:
    """SQLite, a runner writing its step commits from its event loop (`sqlite_loop`): the same
    check on that connection, in the loop (no hop to the database thread at each poll). `version`
    gives None while the connection fails: the runner looks for work when it fails and when it is
    back, as the check in the thread does."""

    async def read() -> int | None:
        return version()

    await _poll(read, wake)


async def _poll(read: Callable[[], Awaitable[int | None]], wake: Callable[[], None]) -> None:
    """Every SQLITE_POLL, `wake()` when `read()` (a data_version, None on an error) has moved."""
    last = await read()
    while True:
        await asyncio.sleep(SQLITE_POLL)
        version = await read()
        if version != last:  # a change, or the file is back after an error: look for work
            wake()
        last = version


def _sqlite_data_version() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA data_version")
        return cursor.fetchone()[0]


def _libpq_params() -> dict[str, Any]:
    return libpq_params(connection.settings_dict)


def libpq_params(settings: dict[str, Any]) -> dict[str, Any]:
    """psycopg's connection parameters for a Django database's `settings` (a LISTEN connection's)."""
    params: dict[str, Any] = {"dbname": settings["NAME"]}
    for libpq, django in (("user", "USER"), ("password", "PASSWORD"), ("host", "HOST"), ("port", "PORT")):
        if settings.get(django):
            params[libpq] = settings[django]
    for option, value in (settings.get("OPTIONS") or {}).items():
        if option in LIBPQ_OPTIONS:
            params[option] = value
    user_timeout = params.get("tcp_user_timeout")
    if user_timeout and "keepalives" not in params:
        # It sends nothing while it waits, so a partition would go unseen and a runner woken by
        # nothing once the network heals: keepalives probe it, and it fails within about the
        # tcp_user_timeout (settings.py) after the cut; its reconnect then wakes the runner.
        seconds = max(1, round(int(user_timeout) / 1000 / KEEPALIVE_PROBES))
        params.update(
            keepalives=1,
            keepalives_idle=seconds,
            keepalives_interval=seconds,
            keepalives_count=KEEPALIVE_PROBES,
        )
    return params
