"""What a job is doing now: its stage and detail, and when a step waiting to retry tries again.
One function for every page that says it (`GET /jobs/{id}`, `manage.py jobs status`, and the
inspector's and dashboard's labels through the workflows' `live_labels`), so they never disagree,
and one query for a whole page of jobs, so a list costs no query per job."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workflows import TERMINAL, EntryStatus, RunStatus


@dataclass(frozen=True)
class JobNow:
    stage: str | None
    detail: str | None
    next_attempt_at: dt.datetime | None


def stage_of(step_name: str) -> str:
    """The stage a step of aiJob or reviewedBrief works in ("failed" for a step of none)."""
    if step_name.startswith("enrich-"):
        return "enriching"
    stages = {"extract": "extracting", "summarize": "summarizing", "publish": "publishing"}
    return {**stages, "record-publication": "published"}.get(step_name, "failed")


def jobs_now(runs: Sequence[Any]) -> dict[str, JobNow]:
    """Run id -> what the job is doing now, for runs (rows or records: `id`, `status`, `state`) of
    one database, read in one query: `stage` and `detail` of the latest progress event, or of the
    step running now when that started after it; `next_attempt_at` when a step waits to retry."""
    if not runs:
        return {}
    return {str(run.id): _now(run, row) for run, row in zip(runs, _latest(runs), strict=True)}


def live_labels(runs: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """The workflows' `live_labels`: the stage now, the one `GET /jobs/{id}` gives."""
    return {run_id: {"stage": now.stage} for run_id, now in jobs_now(runs).items() if now.stage}


def _latest(runs: Sequence[Any]) -> list[dict[str, Any]]:
    """Per run, in order: its latest progress event, its running step, its first retry due."""
    from django.db.models import JSONField, OuterRef, Subquery

    from workflows.models import Entry, Event, Run

    using = getattr(getattr(runs[0], "_state", None), "db", None)  # a page read off a replica
    steps = Entry.objects.filter(run=OuterRef("pk"), superseded=False, kind=Entry.Kind.STEP)
    progress = Event.objects.filter(run=OuterRef("pk"), name="progress").order_by("-id")
    running = steps.filter(status=EntryStatus.RUNNING).order_by("-id")
    retrying = steps.filter(status=EntryStatus.RETRYING).exclude(wake_at=None).order_by("wake_at")
    rows = (
        Run.objects.using(using)
        .filter(id__in=[run.id for run in runs])
        .annotate(
            now_payload=Subquery(progress.values("payload")[:1], output_field=JSONField()),
            now_at=Subquery(progress.values("created_at")[:1]),
            now_running=Subquery(running.values("name")[:1]),
            now_running_at=Subquery(running.values("started_at")[:1]),
            now_retrying=Subquery(retrying.values("name")[:1]),
            now_retry_at=Subquery(retrying.values("wake_at")[:1]),
        )
        .values(
            "id", "now_payload", "now_at", "now_running", "now_running_at", "now_retrying", "now_retry_at"
        )
    )
    found = {str(row["id"]): row for row in rows}
    return [found.get(str(run.id), {}) for run in runs]


def _now(run: Any, row: dict[str, Any]) -> JobNow:
    payload = row.get("now_payload")
    payload = payload if isinstance(payload, dict) else {}
    state = run.state if isinstance(run.state, dict) else {}
    stage, detail = payload.get("stage") or state.get("stage"), payload.get("detail")
    running, since, latest = row.get("now_running"), row.get("now_running_at"), row.get("now_at")
    if running is not None and (latest is None or (since or latest) > latest):
        step_stage = stage_of(running)
        stage = step_stage if step_stage != "failed" else stage
        detail = f"{running} is running"
    retrying = row.get("now_retrying")
    next_attempt = row.get("now_retry_at") if retrying is not None and run.status not in TERMINAL else None
    if run.status == RunStatus.CANCELLED:  # whatever it was doing, it does no more
        detail = f"cancelled; {retrying} will not be retried" if retrying is not None else "cancelled"
    return JobNow(stage=stage, detail=detail, next_attempt_at=next_attempt)
