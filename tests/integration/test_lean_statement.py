"""The step commit's round trip on libpq by hand (`lean_statement`), on a real connection: rows
as psycopg loads them, the server's refusals as psycopg's errors on a connection that stays
usable, statements prepared once and within bounds, a statement longer than the socket takes at
once, and an interrupted wait that leaves no connection half way through a statement."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid

import psycopg
import pytest
from django.db import connection

from workflows.storage.django import lean_statement
from workflows.storage.django.lean_statement import LeanStatements
from workflows.storage.django.notify import _libpq_params
from workflows.storage.django.prepared import NEVER_BY_COUNT

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="libpq is PostgreSQL's"),
]


async def _connect(prepare: bool = True) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(
        **_libpq_params(), autocommit=True, prepare_threshold=NEVER_BY_COUNT if prepare else None
    )


async def _prepared_count(conn: psycopg.AsyncConnection) -> int:
    cursor = await conn.execute("SELECT count(*) FROM pg_prepared_statements")
    return (await cursor.fetchone())[0]


def test_rows_come_back_as_psycopg_loads_them():
    async def go():
        async with await _connect() as conn:
            lean = LeanStatements(conn)
            at = dt.datetime(2026, 12, 7, 3, 0, tzinfo=dt.UTC)
            some = uuid.uuid4()
            row = await lean.fetchone(
                "SELECT %s::integer + 1, %s::timestamptz, %s::uuid, %s::jsonb, NULL::bigint",
                [41, at, some, json.dumps({"a": [1, "é"]})],
                prepare=True,
            )
            none = await lean.fetchone("SELECT 1 WHERE false", [], prepare=False)
            return row, none, at, some

    row, none, at, some = asyncio.run(go())
    assert row == (42, at, some, {"a": [1, "é"]}, None)
    assert none is None


def test_a_refused_statement_raises_psycopgs_error_and_the_connection_goes_on():
    async def go():
        async with await _connect() as conn:
            lean = LeanStatements(conn)
            await conn.execute("CREATE TEMPORARY TABLE lean_t (id integer PRIMARY KEY)")
            await lean.fetchone("INSERT INTO lean_t VALUES (%s) RETURNING id", [1], prepare=True)
            with pytest.raises(psycopg.errors.UniqueViolation) as refused:
                await lean.fetchone("INSERT INTO lean_t VALUES (%s) RETURNING id", [1], prepare=True)
            with pytest.raises(psycopg.errors.DivisionByZero):
                await lean.fetchone("SELECT 1 / %s::integer", [0], prepare=False)
            after = await lean.fetchone("INSERT INTO lean_t VALUES (%s) RETURNING id", [2], prepare=True)
            through_psycopg = await (await conn.execute("SELECT count(*) FROM lean_t")).fetchone()
            return refused.value, after, through_psycopg

    refused, after, through_psycopg = asyncio.run(go())
    assert refused.diag.constraint_name == "lean_t_pkey"
    assert after == (2,) and through_psycopg == (2,)


@pytest.mark.parametrize("connection_prepares", [True, False])
def test_statements_are_prepared_once_when_asked_and_when_the_connection_prepares(connection_prepares):
    async def go():
        async with await _connect(prepare=connection_prepares) as conn:
            lean = LeanStatements(conn)
            for n in range(3):
                assert await lean.fetchone("SELECT %s::integer * 2", [n], prepare=True) == (2 * n,)
            await lean.fetchone("SELECT %s::integer * 3", [1], prepare=False)
            return await _prepared_count(conn)

    assert asyncio.run(go()) == (1 if connection_prepares else 0)


def test_the_least_recently_used_statement_is_deallocated_past_the_bound(monkeypatch):
    monkeypatch.setattr(lean_statement, "PREPARED_MAX", 3)

    async def go():
        async with await _connect() as conn:
            lean = LeanStatements(conn)
            for n in range(3):
                await lean.fetchone(f"SELECT %s::integer + {n}", [1], prepare=True)
            await lean.fetchone("SELECT %s::integer + 0", [1], prepare=True)  # used again: kept
            await lean.fetchone("SELECT %s::integer + 9", [1], prepare=True)  # pushes "+ 1" out
            cursor = await conn.execute("SELECT statement FROM pg_prepared_statements ORDER BY name")
            texts = [r[0] for r in await cursor.fetchall()]
            again = await lean.fetchone("SELECT %s::integer + 1", [1], prepare=True)  # prepared anew
            return texts, again

    texts, again = asyncio.run(go())
    assert sorted(texts) == ["SELECT $1::integer + 0", "SELECT $1::integer + 2", "SELECT $1::integer + 9"]
    assert again == (2,)


def test_a_statement_longer_than_the_socket_takes_at_once_goes_whole():
    payload = "x" * (8 * 1024 * 1024)  # far beyond a socket's send buffer: written as it drains

    async def go():
        async with await _connect() as conn:
            return await LeanStatements(conn).fetchone("SELECT length(%s::text)", [payload], prepare=False)

    assert asyncio.run(asyncio.wait_for(go(), 60)) == (len(payload),)  # a half-sent one never answers


def test_an_interrupted_wait_closes_the_connection_instead_of_leaving_it_mid_statement():
    async def go():
        conn = await _connect()
        lean = LeanStatements(conn)
        waiting = asyncio.create_task(lean.fetchone("SELECT pg_sleep(%s)", [10], prepare=True))
        await asyncio.sleep(0.2)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        closed = conn.closed
        await conn.close()
        return closed

    assert asyncio.run(go()) is True


def test_a_connection_the_server_ended_raises_operational_error():
    async def go():
        async with await _connect() as conn:
            lean = LeanStatements(conn)
            with psycopg.connect(**_libpq_params(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
            with pytest.raises(psycopg.OperationalError):
                await lean.fetchone("SELECT %s::integer", [1], prepare=True)

    asyncio.run(go())
