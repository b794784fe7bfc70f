"""A transaction step's body run inside its commit (`ctx.transaction`): on Django's connection of
the store's database, in the transaction `writes.write_commit` holds, after the run's fence.

Its ORM writes commit with the step's record or not at all, so it may only use the store's
database: a query on any other alias is refused before it is sent (it could not be part of the
transaction, and a crash between the two commits would keep one without the other).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from ...core.exceptions import TransactionBodyFailed

STORE_ALIAS = DEFAULT_DB_ALIAS  # the store's database: `writes` commits on `django.db.connection`


class OtherDatabaseUsed(Exception):
    """A transaction step's body sent a query to a database other than the store's."""


def run_body(body: Callable[[], None]) -> None:
    """Call `body` with every other database alias refused. Whatever it raises comes back as
    TransactionBodyFailed: the caller's `transaction.atomic()` rolls everything back, the fence
    included, and the engine records the failure as the step's failed attempt."""
    try:
        with contextlib.ExitStack() as guards:
            for alias in connections:
                if alias != STORE_ALIAS:
                    guards.enter_context(connections[alias].execute_wrapper(_refuse(alias)))
            body()
    except TransactionBodyFailed:
        raise
    except Exception as exc:
        raise TransactionBodyFailed(exc) from exc


def _refuse(alias: str) -> Callable[..., Any]:
    def refuse(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        raise OtherDatabaseUsed(
            f"a transaction step may only use the database {STORE_ALIAS!r}, where its writes commit "
            f"with the step's record; it sent a query to {alias!r}"
        )

    return refuse
