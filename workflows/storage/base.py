"""The storage interface the engine talks to: the synchronous methods (`StoreMethods`), their
async twins for the engine and async callers, the store's clock and its change watch.

`DjangoStore` implements it (the engine imports no Django, so it talks to this). A twin runs its
synchronous method where the store says (`run_sync`: Django's database thread for the Django
store); a store may override a twin with a faster way (the Django store's event-loop paths).
"""

from __future__ import annotations

import datetime as dt
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from ..core.clock import Clock
from ..core.concurrency import GroupUse
from ..core.limits import Grant, Limiter
from ..core.new_run import NewRun
from ..core.records import (
    NOT_EDITED,
    Audit,
    Commit,
    CommitResult,
    EntryRecord,
    EventRecord,
    MessageRecord,
    OutgoingMessage,
    RunnerRecord,
    RunRecord,
)
from ..core.schedules import RunStart, ScheduleDeclaration, ScheduleRecord
from ..core.streams import ChunkRecord
from .methods import Statement, StoreMethods

P = ParamSpec("P")
R = TypeVar("R")


class Store(StoreMethods):
    # --- time ---
    @abstractmethod
    def database_time(self) -> dt.datetime:
        """The store's own clock, read now: the one clock every process sharing the store decides
        on (`shared_clock`)."""

    @property
    @abstractmethod
    def shared_clock(self) -> Clock:
        """The clock of decisions other processes must agree on (leases, due times, claims,
        schedule fires, limiter windows), anchored to `database_time`."""

    # --- async twins ---
    @abstractmethod
    async def run_sync(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Where a twin runs its synchronous method (for the Django store: a database thread)."""

    async def adatabase_time(self) -> dt.datetime:
        return await self.run_sync(self.database_time)

    async def aget_or_create_run(
        self, new: NewRun, together: Sequence[Statement] = ()
    ) -> tuple[RunRecord, bool]:
        return await self.run_sync(self.get_or_create_run, new, together)

    async def aget_or_create_held_run(
        self, new: NewRun, *, owner: str, lease_seconds: float
    ) -> tuple[RunRecord, bool, bool]:
        return await self.run_sync(self.get_or_create_held_run, new, owner=owner, lease_seconds=lease_seconds)

    async def aget_run(self, run_id: str) -> RunRecord:
        return await self.run_sync(self.get_run, run_id)

    async def afind_run(self, workflow: str, key: list[str]) -> RunRecord:
        return await self.run_sync(self.find_run, workflow, key)

    async def aclaim(
        self,
        *,
        owner: str,
        workflows: list[str],
        limit: int,
        lease_seconds: float,
        now: dt.datetime,
        concurrency: Mapping[str, int] | None = None,
    ) -> list[RunRecord]:
        return await self.run_sync(
            self.claim,
            owner=owner,
            workflows=workflows,
            limit=limit,
            lease_seconds=lease_seconds,
            now=now,
            concurrency=concurrency,
        )

    async def anext_wake_at(
        self, *, owner: str, workflows: list[str], concurrency: Mapping[str, int] | None = None
    ) -> dt.datetime | None:
        return await self.run_sync(
            self.next_wake_at, owner=owner, workflows=workflows, concurrency=concurrency
        )

    async def aunpark_held(self, workflows: list[str]) -> int:
        return await self.run_sync(self.unpark_held, workflows)

    async def aconcurrency_use(self, caps: Mapping[str, int], *, now: dt.datetime) -> list[GroupUse]:
        return await self.run_sync(self.concurrency_use, caps, now=now)

    async def aheartbeat(
        self, *, owner: str, run_ids: list[str], lease_seconds: float, now: dt.datetime
    ) -> dict[str, bool]:
        return await self.run_sync(
            self.heartbeat, owner=owner, run_ids=run_ids, lease_seconds=lease_seconds, now=now
        )

    async def arelease(self, *, owner: str, run_ids: list[str], now: dt.datetime) -> None:
        return await self.run_sync(self.release, owner=owner, run_ids=run_ids, now=now)

    async def arecover_cut_attempts(
        self, run_id: str, *, owner: str, reason: str, lost_at: dt.datetime | None, now: dt.datetime
    ) -> None:
        return await self.run_sync(
            self.recover_cut_attempts, run_id, owner=owner, reason=reason, lost_at=lost_at, now=now
        )

    async def aload_history(self, run_id: str) -> list[EntryRecord]:
        return await self.run_sync(self.load_history, run_id)

    async def aload_resume(self, run_id: str) -> tuple[list[EntryRecord], list[MessageRecord] | None]:
        return await self.run_sync(self.load_resume, run_id)

    async def acommit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        return await self.run_sync(self.commit, run_id=run_id, owner=owner, commit=commit, now=now)

    async def aavailable_messages(
        self, run_id: str, queues: list[str] | None, limit: int
    ) -> list[MessageRecord]:
        return await self.run_sync(self.available_messages, run_id, queues, limit)

    async def asend(
        self, message: OutgoingMessage, *, now: dt.datetime, audit: Audit | None = None
    ) -> MessageRecord:
        return await self.run_sync(self.send, message, now=now, audit=audit)

    async def aget_message(self, message_id: int) -> MessageRecord:
        return await self.run_sync(self.get_message, message_id)

    async def arequest_cancel(self, run_id: str, *, now: dt.datetime) -> RunRecord:
        return await self.run_sync(self.request_cancel, run_id, now=now)

    async def aacquire_limit(
        self, limiter: Limiter, *, holder: str, expires_at: dt.datetime, now: dt.datetime
    ) -> Grant:
        return await self.run_sync(self.acquire_limit, limiter, holder=holder, expires_at=expires_at, now=now)

    async def arelease_limit(self, slot: int, *, tokens: int, now: dt.datetime) -> None:
        return await self.run_sync(self.release_limit, slot, tokens=tokens, now=now)

    async def alist_events(self, run_id: str, *, after: int = 0, limit: int = 1000) -> list[EventRecord]:
        return await self.run_sync(self.list_events, run_id, after=after, limit=limit)

    async def alist_chunks(
        self, run_id: str, stream: str | None, *, after: int = 0, limit: int = 1000
    ) -> list[ChunkRecord]:
        return await self.run_sync(self.list_chunks, run_id, stream, after=after, limit=limit)

    async def aregister_runner(self, runner: RunnerRecord) -> None:
        return await self.run_sync(self.register_runner, runner)

    async def atouch_runner(self, owner: str, *, now: dt.datetime, clock_offset: float | None = None) -> bool:
        return await self.run_sync(self.touch_runner, owner, now=now, clock_offset=clock_offset)

    async def aunregister_runner(self, owner: str) -> None:
        return await self.run_sync(self.unregister_runner, owner)

    async def alist_runners(self) -> list[RunnerRecord]:
        return await self.run_sync(
            self.list_runners,
        )

    async def aforget_runners(self, *, seen_before: dt.datetime) -> int:
        return await self.run_sync(self.forget_runners, seen_before=seen_before)

    async def aexpire_leases(self, owner: str, *, lapsed_at: dt.datetime, now: dt.datetime) -> int:
        return await self.run_sync(self.expire_leases, owner, lapsed_at=lapsed_at, now=now)

    async def adue_elsewhere(
        self, workflows: list[str], *, now: dt.datetime, limit: int = 50
    ) -> dict[str, int]:
        return await self.run_sync(self.due_elsewhere, workflows, now=now, limit=limit)

    async def areplay(
        self,
        run_id: str,
        entry_id: int,
        *,
        audit: Audit,
        now: dt.datetime,
        input: Any = NOT_EDITED,
        redeliver: bool = True,
    ) -> RunRecord:
        return await self.run_sync(
            self.replay, run_id, entry_id, audit=audit, now=now, input=input, redeliver=redeliver
        )

    async def aretry_now(self, run_id: str, entry_id: int, *, audit: Audit, now: dt.datetime) -> RunRecord:
        return await self.run_sync(self.retry_now, run_id, entry_id, audit=audit, now=now)

    async def acancel(self, run_id: str, *, audit: Audit, now: dt.datetime) -> RunRecord:
        return await self.run_sync(self.cancel, run_id, audit=audit, now=now)

    async def astart_run(
        self, new: NewRun, *, replace: bool = False, debounce: float | None = None
    ) -> tuple[RunRecord, bool]:
        return await self.run_sync(self.start_run, new, replace=replace, debounce=debounce)

    async def async_schedules(
        self, *, declared: list[ScheduleDeclaration], served: list[str], now: dt.datetime
    ) -> None:
        return await self.run_sync(self.sync_schedules, declared=declared, served=served, now=now)

    async def alist_schedules(self) -> list[ScheduleRecord]:
        return await self.run_sync(
            self.list_schedules,
        )

    async def afire_schedule(
        self,
        name: str,
        *,
        expected_next: dt.datetime,
        starts: list[RunStart],
        next_fire_at: dt.datetime,
        now: dt.datetime,
    ) -> list[RunRecord] | None:
        return await self.run_sync(
            self.fire_schedule,
            name,
            expected_next=expected_next,
            starts=starts,
            next_fire_at=next_fire_at,
            now=now,
        )

    # --- change notification ---
    @abstractmethod
    async def watch(self, wake: Callable[[], None]) -> None:
        """Call `wake()` whenever another process may have made work runnable; runs until cancelled."""
