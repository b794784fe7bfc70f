"""Runs awaiting an operator's decision on a queue their workflow declares with `choices`: across
runs for the dashboard (`awaiting_decision`), and for one run's page (`open_decisions`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from ..core.records import TERMINAL, EntryStatus, RunStatus
from ..engine.definition import Workflow
from ..models import Entry, Run
from . import declarations
from .declarations import RunLabels

DECISION_SCAN = 500  # open queue waits looked at, newest first


@dataclass
class DecisionQueue:
    queue: str
    choices: list[str]  # the declared choices' labels, in order


@dataclass
class Decision:
    """A run waiting on one or more of its workflow's decision queues."""

    run_id: str
    workflow: str
    key: list[Any]
    wait: str  # the open wait's name
    since: dt.datetime
    labels: RunLabels
    queues: list[DecisionQueue]


def awaiting_decision(limit: int = 20, using: str | None = None) -> list[Decision]:
    """Runs waiting right now on a decision queue (`queue(..., choices=...)`) of the definition
    they run, oldest wait first. Only the (workflow, version) pairs that declare one are read; the
    queues a wait listens to live in its JSON input, so they are matched here rather than with a
    JSON lookup SQLite lacks. A workflow no registry of this server names declares nothing."""
    pairs = (
        Run.objects.using(using)
        .filter(status=RunStatus.WAITING)
        .order_by()
        .values_list("workflow", "version")
    )
    declared: dict[tuple[str, str], tuple[Workflow | None, dict[str, list[str]]]] = {}
    for workflow, version in pairs.distinct():
        definition = declarations.definition(workflow, version)
        queues = declarations.decision_queues(definition)
        if queues:
            declared[(workflow, version)] = (definition, queues)
    if not declared:
        return []
    of_declared = Q()
    for workflow, version in declared:
        of_declared |= Q(run__workflow=workflow, run__version=version)
    waits = list(
        Entry.objects.using(using)
        .filter(
            of_declared,
            kind=Entry.Kind.QUEUE,
            status=EntryStatus.WAITING,
            superseded=False,
            run__status=RunStatus.WAITING,
        )
        .select_related("run")
        .order_by("-started_at")[:DECISION_SCAN]
    )
    labels = declarations.runs_labels(list({w.run_id: w.run for w in waits}.values()))
    found: dict[str, Decision] = {}
    for wait in waits:
        definition, queues = declared[(wait.run.workflow, wait.run.version)]
        listens = (wait.input or {}).get("queues") or []  # none named: every queue
        open_queues = [q for q in queues if not listens or q in listens]
        if not open_queues:
            continue
        decision = found.get(str(wait.run_id))
        if decision is None:  # a run whose join branches wait apart: one row, every queue
            decision = found[str(wait.run_id)] = Decision(
                run_id=str(wait.run_id),
                workflow=wait.run.workflow,
                key=wait.run.key,
                wait=wait.name,
                since=wait.started_at or wait.run.created_at,
                labels=labels[str(wait.run_id)],
                queues=[],
            )
        elif wait.started_at and wait.started_at < decision.since:
            decision.wait, decision.since = wait.name, wait.started_at
        seen = {dq.queue for dq in decision.queues}
        decision.queues += [DecisionQueue(q, queues[q]) for q in open_queues if q not in seen]
    return sorted(found.values(), key=lambda d: d.since)[:limit]


def open_decisions(run: Run, entries: list[Entry]) -> dict[str, list[str]]:
    """The decision queues (`queue(..., choices=...)`) the run's open queue waits listen to."""
    if run.status in TERMINAL:
        return {}
    declared = declarations.decision_queues(declarations.definition(run.workflow, run.version))
    found: dict[str, list[str]] = {}
    for e in entries:
        if e.kind == Entry.Kind.QUEUE and e.status == EntryStatus.WAITING and not e.superseded:
            listens = (e.input or {}).get("queues") or list(declared)  # none named: every queue
            found.update({q: declared[q] for q in listens if q in declared})
    return found
