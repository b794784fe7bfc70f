"""Runners' presence as store methods of the Django store: one row per live runner process
(`RunnerPresence`), the expiry of a dead runner's leases for a same-host takeover, and the due
work of workflows a runner does not serve. None of it touches the claim query: an expired lease is
claimed by the ordinary claim, as a lapsed one.
"""

from __future__ import annotations

import datetime as dt

from django.db import connection
from django.db.models import Count

from ...core.records import LIVE, RunnerRecord, RunStatus
from ...models import Run, RunnerPresence
from . import notify


def runner_record(row: RunnerPresence) -> RunnerRecord:
    return RunnerRecord(
        owner=row.owner,
        host=row.host,
        pid=row.pid,
        machine=row.machine,
        process_start=row.process_start,
        started_at=row.started_at,
        last_seen=row.last_seen,
        lease_seconds=row.lease_seconds,
        concurrency=row.concurrency,
        workflows={name: list(versions) for name, versions in (row.workflows or {}).items()},
        clock_offset=row.clock_offset,
    )


class DjangoPresence:
    """Mixed into DjangoStore (the Store interface's `runners' presence` methods, and the
    database's time that runners decide on)."""

    def database_time(self) -> dt.datetime:
        """PostgreSQL: the server's clock (`clock_timestamp()`, not the transaction's start).
        SQLite: its `'now'`, which is this host's clock: every process sharing the file shares it."""
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT clock_timestamp()")
                return cursor.fetchone()[0].astimezone(dt.UTC)
            cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
            return dt.datetime.fromisoformat(cursor.fetchone()[0]).replace(tzinfo=dt.UTC)

    def register_runner(self, runner: RunnerRecord) -> None:
        RunnerPresence(
            owner=runner.owner,
            host=runner.host,
            pid=runner.pid,
            machine=runner.machine,
            process_start=runner.process_start,
            started_at=runner.started_at,
            last_seen=runner.last_seen,
            lease_seconds=runner.lease_seconds,
            concurrency=runner.concurrency,
            workflows=runner.workflows,
            clock_offset=runner.clock_offset,
        ).save()

    def touch_runner(self, owner: str, *, now: dt.datetime, clock_offset: float | None = None) -> bool:
        fields: dict[str, object] = {"last_seen": now}
        if clock_offset is not None:
            fields["clock_offset"] = clock_offset
        return RunnerPresence.objects.filter(owner=owner).update(**fields) > 0

    def unregister_runner(self, owner: str) -> None:
        RunnerPresence.objects.filter(owner=owner).delete()

    def list_runners(self) -> list[RunnerRecord]:
        return [runner_record(row) for row in RunnerPresence.objects.order_by("started_at", "owner")]

    def forget_runners(self, *, seen_before: dt.datetime) -> int:
        deleted, _ = RunnerPresence.objects.filter(last_seen__lt=seen_before).delete()
        return deleted

    def expire_leases(self, owner: str, *, lapsed_at: dt.datetime, now: dt.datetime) -> int:
        lapsed_at = min(lapsed_at, now)
        expired = Run.objects.filter(
            lease_owner=owner, status=RunStatus.RUNNING, wake_at__gt=lapsed_at
        ).update(wake_at=lapsed_at)
        if expired:
            notify.notify_now()  # every runner may claim them now
        return expired

    def due_elsewhere(self, workflows: list[str], *, now: dt.datetime, limit: int = 50) -> dict[str, int]:
        rows = (
            Run.objects.filter(wake_at__lte=now, status__in=LIVE)
            .exclude(workflow__in=workflows)
            .order_by()
            .values("workflow")
            .annotate(n=Count("id"))
            .order_by("workflow")[:limit]
        )
        return {row["workflow"]: row["n"] for row in rows}
