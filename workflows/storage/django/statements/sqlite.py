"""The statements only SQLite runs (its writers are serialised: nothing to lock or skip)."""

from __future__ import annotations

from .shared import CLAIM_ORDER, NOT_PAUSED, PICKED, WAS

# SQLite: the same, one ordered read per workflow (`UNION ALL` of each workflow's first n, in
# claim order), then the first n of those: no sort of the whole backlog either (writers are
# serialised: nothing to lock or skip). Up to SQLITE_PER_WORKFLOW_MAX workflows (SQLite caps a
# compound SELECT at 500 parts); beyond, CLAIM_DUE.
CLAIM_ONE_WORKFLOW = (
    f"SELECT * FROM (SELECT {PICKED} FROM workflows_run"
    f" WHERE workflow = %s AND wake_at <= %s AND status IN (%s, %s, %s)"
    f" AND {NOT_PAUSED.format(name='workflows_run.workflow')} ORDER BY {CLAIM_ORDER} LIMIT %s)"
)
CLAIM_DUE_SQLITE = f"SELECT id AS claim_id, {WAS} FROM ({{parts}}) ORDER BY {CLAIM_ORDER} LIMIT %s"
SQLITE_PER_WORKFLOW_MAX = 100
UNPARK = (
    "UPDATE workflows_run SET wake_at = held_at, held_at = NULL WHERE held_at IS NOT NULL AND wake_at IS NULL"
    " AND id IN ({first})"
)
