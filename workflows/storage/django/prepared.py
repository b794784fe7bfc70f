"""The store's hot statements, prepared once per connection on PostgreSQL.

Django binds parameters on the client (psycopg's `ClientCursor`: values are inlined into the SQL
text), so PostgreSQL parses and plans a step's commit (a statement of data-modifying CTEs) anew
each time, about a third of its time on the server. The statements the engine sends for every
step and every run (a commit, a claim, a run's creation, a run read) go through `hot_cursor()`
instead: on PostgreSQL a cursor that binds on the server and asks psycopg to prepare, so the
first use on a connection sends PREPARE and every later one an EXECUTE of the plan by name.

Everything else stays on Django's cursor: it is the same `CursorWrapper` (execute wrappers,
`CaptureQueriesContext`, `connection.queries` see the hot statements too), only the psycopg
cursor inside it differs. psycopg forgets its prepared statements when a transaction rolls back
and after DDL, and keeps at most 100 per connection (least recently used dropped), so a statement
is never run against a stale plan.

`WORKFLOWS["PREPARED_STATEMENTS"] = False` turns it off: needed behind PgBouncer in transaction
mode before 1.21 (a prepared statement lives in one server session, and such a pooler hands each
transaction to any of them); PgBouncer 1.21+ with `max_prepared_statements` set handles them.
Written by hand because Django prepares nothing unless every statement is server-bound
(`OPTIONS["server_side_binding"]`), which changes how all the project's queries bind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache, lru_cache
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.backends.utils import CursorWrapper

# psycopg prepares only when a connection has a threshold; Django sets none (a connection then
# prepares nothing). This one is high enough that nothing is ever prepared for being repeated:
# only the statements sent here with prepare=True are.
NEVER_BY_COUNT = 2**31 - 1


@contextmanager
def hot_cursor() -> Iterator[CursorWrapper]:
    """Django's cursor, whose statements are prepared on PostgreSQL (unless turned off)."""
    if connection.vendor == "postgresql" and enabled():
        # What `connection.cursor()` does, less the psycopg cursor it would create for us to close
        # at once (half this function's time). `_prepare_cursor` (thread check, debug or plain
        # wrapper) is private but unchanged since Django 1.11; instrumentation overrides it.
        connection.close_if_health_check_failed()
        connection.ensure_connection()  # async-unsafe, as cursor() is
        with connection.wrap_database_errors:
            wrapper = connection._prepare_cursor(_preparing_cursor(connection.connection))  # type: ignore[attr-defined]
    else:
        wrapper = connection.cursor()
    with wrapper:
        yield wrapper


def enabled() -> bool:
    """`WORKFLOWS["PREPARED_STATEMENTS"]`, default True (read here: `workflows.conf` imports the store)."""
    return bool(getattr(settings, "WORKFLOWS", {}).get("PREPARED_STATEMENTS", True))


def _preparing_cursor(raw: Any) -> Any:
    if raw.prepare_threshold is None:
        raw.prepare_threshold = NEVER_BY_COUNT
    return _cursor_class()(raw)


@cache
def _cursor_class() -> type:
    """Built on first use: Django's PostgreSQL backend imports psycopg, which a SQLite-only
    install may lack."""
    from django.db.backends.postgresql import base

    server_binding: Any = base.ServerBindingCursor  # psycopg's Cursor with Django's mixin

    class PreparingCursor(server_binding):
        """Binds on the server and prepares every statement it executes."""

        _query_cls = query_class()

        def execute(
            self, query: Any, params: Any = None, *, prepare: bool | None = None, **kwargs: Any
        ) -> Any:
            return super().execute(query, params, prepare=True if prepare is None else prepare, **kwargs)

        def _send_query_prepared(self, name: bytes, pgq: Any, **kwargs: Any) -> None:
            # psycopg notes the query it sends only when it is not prepared; Django reads that note
            # for `connection.queries` and query capture (last_executed_query), so note it here too.
            self._query = pgq
            super()._send_query_prepared(name, pgq, **kwargs)

    return PreparingCursor


@cache
def async_cursor_class() -> type:
    """psycopg's async cursor with the same parse-once queries (the async commit path's)."""
    import psycopg

    class ParsedOnceAsyncCursor(psycopg.AsyncCursor[Any]):
        _query_cls = query_class()

    return ParsedOnceAsyncCursor


@cache
def query_class() -> type:
    """psycopg's query class that parses each statement text once, if the installed psycopg
    takes it; else psycopg's own (the same statements, only parsed at every execution)."""
    from psycopg import _queries

    parsed = lru_cache(maxsize=256)(_queries._query2pg_nocache)

    class ParsedOnce(_queries.PostgresQuery):
        """psycopg parses a statement's `%s` placeholders anew on every execution when it is long
        or has many parameters (a group commit's statement: a quarter of a busy runner's CPU);
        the store's statements repeat, so each text is parsed once (a private psycopg API, pinned
        in requirements.txt; the prepared-statement tests exercise it). A text whose only `%` are
        `%s` placeholders (every statement the store builds) is numbered by a split instead of
        psycopg's tokenizer: a group commit's text is often new (its runs' shapes vary), and
        then the tokenizer's pass over several kilobytes was the cost."""

        def convert(self, query: Any, vars: Any) -> None:
            if vars is None or not isinstance(query, str | bytes):
                return super().convert(query, vars)
            text = self._ensure_bytes(query)
            numbered = _numbered_once(text) if len(text) <= _NUMBERED_KEPT_UP_TO else _numbered(text)
            if numbered is None:
                self.query, self._want_formats, self._order, self._parts = parsed(text, self._tx.encoding)
            else:
                self.query, self._parts = numbered
                self._want_formats, self._order = [_queries.PyFormat.AUTO] * (len(self._parts) - 1), None
            self.dump(vars)
            return None

    return ParsedOnce if _converts(ParsedOnce) else _queries.PostgresQuery


_NUMBERED_KEPT_UP_TO = 4096  # bytes: a longer text (a mixed group's) rarely recurs, numbered each time


@lru_cache(maxsize=256)
def _numbered_once(text: bytes) -> tuple[bytes, list[Any]] | None:
    """`_numbered`, kept for the texts that recur (a run's own commit, a plain group's)."""
    return _numbered(text)


def _numbered(text: bytes) -> tuple[bytes, list[Any]] | None:
    """`text` with its `%s` as `$1, $2...` and psycopg's parts for as many positional parameters
    (what its parameter check reads), or None when the text holds any other `%` (`%%`, `%b`,
    `%(name)s`): psycopg's tokenizer then reads it."""
    pieces = text.split(b"%s")
    if any(b"%" in piece for piece in pieces):
        return None
    numbered = [pieces[0]]
    for n, piece in enumerate(pieces[1:], 1):
        numbered += (b"$%d" % n, piece)
    return b"".join(numbered), _positional_parts(len(pieces) - 1)


@lru_cache(maxsize=64)
def _positional_parts(count: int) -> list[Any]:
    from psycopg import _queries

    return [_queries.QueryPart(b"", n, _queries.PyFormat.AUTO) for n in range(count)] + [
        _queries.QueryPart(b"", 0, _queries.PyFormat.AUTO)
    ]


def _converts(query_class: type) -> bool:
    """Whether the parse-once query class works with the installed psycopg (it leans on private
    names): if a psycopg upgrade changed them, psycopg's own class is used, only slower."""
    from psycopg.adapt import Transformer

    try:
        query, escaped = query_class(Transformer()), query_class(Transformer())
        query.convert("SELECT %s, %s", [1, "a"])
        escaped.convert("SELECT %s, '%%'", [1])  # psycopg's own tokenizer, parsed once
        return (
            query.query == b"SELECT $1, $2" and query.params is not None and len(query.params) == 2
            and escaped.query == b"SELECT $1, '%'" and escaped.params is not None
        )  # fmt: skip
    except Exception:
        return False
