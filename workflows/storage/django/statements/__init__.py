"""Every SQL statement the Django store runs, named in one module per database: `shared` (both),
`postgres` and `sqlite`; here, the builders that pick between the two databases' texts."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ....core.records import LIVE
from ..values import marks, pg, t
from .postgres import CLAIM_DUE_PG, UNPARK_PG
from .shared import CLAIM_DUE, FIRST_HELD
from .sqlite import CLAIM_DUE_SQLITE, CLAIM_ONE_WORKFLOW, SQLITE_PER_WORKFLOW_MAX, UNPARK


def unpark(group: str | None = None, after: str = "") -> tuple[str, list[Any]]:
    """UNPARK of `group`'s first held run; with `after` (PostgreSQL's one-statement commit), of
    the group of the run that CTE updated (`after.concurrency_group`)."""
    on_pg = pg()
    where = f"(SELECT {after}.concurrency_group FROM {after})" if after else "%s"
    first = FIRST_HELD.format(group=where, lock=" FOR UPDATE SKIP LOCKED" if on_pg else "")
    params: list[Any] = [] if after else [group]
    return (UNPARK_PG if on_pg else UNPARK).format(first=first), [*params, *LIVE]


def claim_due(workflows: list[str], limit: int, now: dt.datetime) -> tuple[str, list[Any]]:
    """The pick of due runs of ungrouped workflows, row-locking on PostgreSQL."""
    if pg():
        return CLAIM_DUE_PG.format(limit=limit), [list(workflows), t(now), *LIVE]
    if 1 < len(workflows) <= SQLITE_PER_WORKFLOW_MAX:
        parts = " UNION ALL ".join([CLAIM_ONE_WORKFLOW] * len(workflows))
        params = [v for name in workflows for v in (name, t(now), *LIVE, limit)]
        return CLAIM_DUE_SQLITE.format(parts=parts), [*params, limit]
    return CLAIM_DUE.format(names=marks(len(workflows))), [t(now), *LIVE, *workflows, limit]
