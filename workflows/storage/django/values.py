"""The value adapters the store's statements take, and which database the process writes to.

A commit adapts a dozen values; through `connection.ops` each costs a lookup of this thread's
connection (asgiref's Local) before the adapter runs, about a tenth of a step's commit on SQLite.
The adapters below give the same values as Django's for what the engine passes (UTC datetimes,
run ids as text, JSON values) and leave anything else to Django.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from functools import cache
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections

from ...models import Run


@cache
def _backend() -> tuple[bool, bool]:
    """(on PostgreSQL, SQLite keeping UTC text): fixed for the process by DATABASES."""
    wrapper = connections[DEFAULT_DB_ALIAS]
    on_pg = wrapper.vendor == "postgresql"
    utc_text = (
        wrapper.vendor == "sqlite" and settings.USE_TZ and wrapper.settings_dict.get("TIME_ZONE") is None
    )
    return on_pg, utc_text


def pg() -> bool:
    return _backend()[0]


def t(value: dt.datetime | None) -> Any:
    """A datetime as the backend takes it: itself on PostgreSQL; on SQLite (USE_TZ, the database
    in UTC) the naive UTC text Django writes (`make_naive`, then `str`)."""
    if value is None:
        return None
    on_pg, utc_text = _backend()
    if value.tzinfo is dt.UTC:
        if on_pg:
            return value
        if utc_text:
            return str(value.replace(tzinfo=None))
    return connection.ops.adapt_datetimefield_value(value)


def j(value: Any) -> Any:
    """A JSON value as the backend takes it (Django's `adapt_json_value` with no encoder: on
    PostgreSQL a `Jsonb` dumped by `json.dumps`, made here without looking the connection up)."""
    if value is None:
        return None
    if not _backend()[0]:
        return json.dumps(value)
    return _jsonb()(value, dumps=json.dumps)


@cache
def _jsonb() -> Any:
    from django.db.backends.postgresql.psycopg_any import Jsonb  # only on PostgreSQL: psycopg

    return Jsonb


def rid(run_id: str) -> Any:
    """A run id as the backend stores it (a uuid on PostgreSQL, hex text on SQLite)."""
    if isinstance(run_id, str):
        try:
            value = uuid.UUID(run_id)
        except ValueError:  # Django's error for it
            return Run._meta.pk.get_db_prep_value(run_id, connection)
        return value if _backend()[0] else value.hex
    return Run._meta.pk.get_db_prep_value(run_id, connection)


def marks(n: int) -> str:
    return ", ".join(["%s"] * n)
