"""What runs' model calls used and cost, for the run page, the API's run read and the dashboard
(the adding up and the prices are `workflows.core.costs`; the table is WORKFLOWS["MODEL_PRICES"]).

Usage is recorded on the entry, not per attempt: a step's `meta` is written with each attempt's
record and the next attempt's replaces it, so an entry holds its latest attempt's usage. Every
entry counts once, superseded ones included (a replayed step's model calls were made and paid
for). A failed attempt whose usage a later attempt overwrote is not counted: the figures are a
floor when steps retried after calling a model.

A malformed MODEL_PRICES (`manage.py check` reports it, workflows.E024) prices nothing here: the
pages show tokens only rather than fail.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from .. import conf
from ..core.costs import CostSummary, PriceTable, summarize
from ..models import Entry

COST_WINDOW = dt.timedelta(hours=1)  # the dashboard's: as its other figures (reads.stats)
COST_ROW_CAP = 20_000  # entries with usage read for one window


def prices() -> PriceTable:
    """WORKFLOWS["MODEL_PRICES"], or no prices when it is malformed."""
    try:
        return conf.model_prices()
    except ValueError:
        return PriceTable()


def entries_cost(entries: Iterable[Entry], table: PriceTable | None = None) -> CostSummary:
    """One run's usage and cost from its entries (read already, as the run page and the API do),
    by model and by step (a step in a scope is named `scope/name`)."""
    records = ((e.name if not e.scope else f"{e.scope}/{e.name}", e.meta) for e in entries if e.meta)
    return summarize(records, prices() if table is None else table)


@dataclass
class WorkflowCost:
    workflow: str
    summary: CostSummary


def workflow_costs(now: dt.datetime | None = None, using: str | None = None) -> list[WorkflowCost]:
    """Per workflow, the model calls of the last COST_WINDOW: entries with usage that finished
    in it (a call is counted when its step's record was written), most expensive first, then
    by tokens. One query, bounded by the window and COST_ROW_CAP: the entries' meta is read and
    added up here, since adding up JSON keys in SQL differs between SQLite and PostgreSQL."""
    now = now or timezone.now()
    since = now - COST_WINDOW
    rows = (
        Entry.objects.using(using)
        .filter(finished_at__gte=since, finished_at__lte=now, meta__has_key="usage")
        .order_by()
        .values_list("run__workflow", "name", "meta")[:COST_ROW_CAP]
    )
    by_workflow: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for workflow, name, meta in rows:
        by_workflow[workflow].append((name, meta))
    table = prices()
    found = [WorkflowCost(workflow, summarize(records, table)) for workflow, records in by_workflow.items()]
    found = [f for f in found if f.summary]
    found.sort(key=lambda f: (-(f.summary.cost or 0.0), -f.summary.total.tokens, f.workflow))
    return found


__all__ = ["COST_WINDOW", "WorkflowCost", "entries_cost", "prices", "workflow_costs"]
