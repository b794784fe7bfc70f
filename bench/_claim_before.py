"""The claim as the store sent it before the per-workflow pick, for the benchmarks that compare
(`bench/hot_path.py`, `bench/claims.py`): one statement that sorts every due run of the runner's
workflows (`shared.CLAIM_DUE`), on PostgreSQL one prepared statement whose commit waits for the disk
and whose plan PostgreSQL chooses; on SQLite the pick and the lease in one transaction, as now."""

from __future__ import annotations

import datetime as dt
from typing import Any

from workflows.core.records import LIVE
from workflows.storage.django import values
from workflows.storage.django.claims import CLAIM_RETURNING, _claim
from workflows.storage.django.prepared import hot_cursor
from workflows.storage.django.statements import shared


def pick_before(workflows: list[str], limit: int, now: dt.datetime) -> tuple[str, list[Any]]:
    text = shared.CLAIM_DUE.format(names=values.marks(len(workflows)))
    if values.pg():
        text += " FOR UPDATE SKIP LOCKED"
    return text, [values.t(now), *LIVE, *workflows, limit]


def send_as_before(pick: tuple[str, list[Any]], lease: tuple[str, list[Any]]) -> list[Any]:
    """Rows of RUN_COLUMNS then was_started."""
    if not values.pg():
        return _claim(pick, lease)
    (due, due_params), (statement, lease_params) = pick, lease
    with hot_cursor() as cursor:
        cursor.execute(
            f"{statement} FROM ({due}) AS claimed WHERE workflows_run.id = claimed.claim_id"
            f" RETURNING {CLAIM_RETURNING}, claimed.was_started",
            lease_params + due_params,
        )
        return cursor.fetchall()
