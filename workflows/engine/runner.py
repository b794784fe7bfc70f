"""The runner: claims runnable runs, executes each in its own task, heartbeats their leases,
wakes at once on new work, and stops gracefully. It only orchestrates: the Execution decides
what a run does, the store decides how it is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import heapq
import logging
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.clock import Clock
from ..core.exceptions import StoreUnavailable
from ..core.records import RunRecord
from ..storage.base import Store
from ..telemetry.tracing import producer_span
from . import housekeeping, slots
from .client import RunHandle
from .executor import Executor
from .housekeeping import Periodic
from .leases import LeaseWatch
from .observers import CommitHook, CommitHooks, Observer, Observers, RunnerSample, WakeOnMessages
from .registry import Registry
from .roster import CLOCK_WARN_OFFSET as CLOCK_WARN_OFFSET  # the inspector flags hosts this far off
from .roster import Roster
from .scheduler import Scheduler

logger = logging.getLogger(__name__)


IDLE_POLL = 30.0  # seconds: longest sleep between reads of the store's schedule
UNTIL_IDLE_HORIZON = 2.0  # seconds: --until-idle waits for runs due this soon (short retry backoffs)
SHUTDOWN_GRACE = 30.0  # seconds: how long a stopping runner lets running steps finish
STORE_RETRY_BASE = 0.5  # seconds: first pause after the store failed, doubling ...
STORE_RETRY_MAX = 30.0  # seconds: ... up to this
RUN_RETRY_MAX = 2.0  # seconds: an abandoned run is tried again at least this often
DEFER_SECONDS = 2.0  # a run of a version this runner does not know waits this long for one that does


class Runner:
    def __init__(
        self,
        *,
        registry: Registry,
        store: Store,
        clock: Clock | None = None,
        concurrency: int = 10,
        lease_seconds: float = 30.0,
        heartbeat_seconds: float = 10.0,
        shutdown_grace: float = SHUTDOWN_GRACE,
        owner: str | None = None,
        watch: bool = True,
        commit_hooks: list[CommitHook] | None = None,
        observers: list[Observer] | None = None,
        periodic: Sequence[Periodic] = (),
        stall_check: bool = True,
    ) -> None:
        """`clock` (default: the store's `shared_clock`, the database's time) takes every decision
        other runners must agree on. `stall_check` False lets a runner start steps on a lease that
        may have lapsed (only to see the multi-host tests fail)."""
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.registry = registry
        self.store = store
        self.clock: Clock = clock or store.shared_clock
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.shutdown_grace = shutdown_grace
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.watch = watch
        self.periodic = list(periodic)
        self.observers = Observers(observers or [])
        self.observers.attached(clock=self.clock)
        # Everyone told of each commit, once, in this order, right after it landed.
        self.commit_observers = Observers(
            [*self.observers.observers, WakeOnMessages(self._poke), CommitHooks(commit_hooks or [])]
        )
        # Wake times of the runs this runner suspended: it wakes for them without asking the store.
        self._timers: list[dt.datetime] = []
        self.schedule_check = min(IDLE_POLL, lease_seconds / 2)  # seconds between reads of the schedule
        self._next_schedule_check = 0.0
        self.scheduler = Scheduler(registry=registry, store=store, clock=self.clock)  # cron schedules
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._caps = registry.concurrency_caps()  # workflow -> max runs of a group at once
        self._unparked = False  # runs set aside under older code put back in line (at start)
        self._claiming = 0  # free slots a claim in flight may fill (`start` leaves them to it)
        self.claims = self.claimed = 0  # claims made and the runs they took (logged at stop)
        self.leases = LeaseWatch(lease_seconds, enabled=stall_check)  # our leases' renewal times
        self.roster = Roster(
            store=store,
            clock=self.clock,
            owner=self.owner,
            registry=registry,
            lease_seconds=lease_seconds,
            concurrency=concurrency,
            schedule_check=self.schedule_check,
        )
        self._clock_read: asyncio.Task[None] | None = None  # the heartbeat's read of the time
        self.executor = Executor(
            registry=registry,
            store=store,
            clock=self.clock,
            owner=self.owner,
            lease_seconds=lease_seconds,
            leases=self.leases,
            roster=self.roster,
            observers=self.observers,
            commit_observers=self.commit_observers,
            stopping=lambda: self._stopping,
            timers=self._timers,
            retry_base=STORE_RETRY_BASE,  # read here: a test may quicken them first
            retry_max=RUN_RETRY_MAX,
            defer_seconds=DEFER_SECONDS,
        )

    # --- control ---------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop claiming; running executions hand their run back at their next entry."""
        self._stopping = True
        for execution in self.executor.executions.values():
            execution.interrupt_requested = True
        self._poke()
        logger.info("runner %s stopping: no new claims; %d run(s) finishing", self.owner, len(self._tasks))

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # --- starting runs here ----------------------------------------------------------------------

    async def start(
        self,
        workflow: str,
        key: list[str] | tuple[str, ...],
        *,
        state: Mapping[str, Any] | None = None,
        priority: int = 0,
    ) -> RunHandle:
        """The run of `key` (as `client.aget_or_create`), executed by this runner at once when it
        creates it and has a free slot: the store creates it already leased here (PostgreSQL in
        one statement, SQLite in one transaction), so no claim follows and no other runner is
        woken, as DBOS's `start_workflow` runs a workflow in the process that starts it. It never
        takes a slot a claim in flight may fill. A workflow with a concurrency limit, a full or
        stopping runner, or a key that already has a run takes the usual way (the run waits for a
        claim, this runner's included). `executed(run_id)` waits for the execution here."""
        client = self.registry.client(workflow, store=self.store, clock=self.clock)
        new = client.start_args(key, state, "existing", None, priority)
        hold = (
            not self._stopping
            and workflow not in self._caps
            and new.concurrency_group is None
            and len(self._tasks) + self._claiming < self.concurrency
        )
        held = False
        with producer_span("start", workflow) as producer:
            new = new.but(trace_context=producer.carrier)
            if hold:
                sent = self.leases.now()
                run, created, held = await self.store.aget_or_create_held_run(
                    new, owner=self.owner, lease_seconds=self.lease_seconds
                )
                if held:
                    self.leases.renewed([run.id], sent)
            else:
                run, created = await self.store.aget_or_create_run(new)
            producer.produced(run_id=run.id, created=created)
        if held:
            self._tasks[run.id] = asyncio.create_task(self._execute(run), name=f"run-{run.id}")
        elif created:
            self._poke()  # stores don't notify their own writes
        return RunHandle(client, run, created)

    async def executed(self, run_id: str) -> None:
        """Wait until this runner's execution of the run (if any) has ended: the run finished,
        waits, or was handed back. At once when this runner is not executing it."""
        task = self._tasks.get(run_id)
        if task is not None:
            await asyncio.shield(task)

    # --- the loop --------------------------------------------------------------------------------

    async def run(self, *, until_idle: bool = False) -> None:
        self._wake = asyncio.Event()
        # Before the first claim: every lease is set on the database's time. Twice: the first
        # read's round trip may include opening a connection, which skews its reading by up to
        # half of that; the second, on a warm connection, is kept when it is the better one.
        await self.roster.read_clock()
        await self.roster.read_clock()
        helpers = [asyncio.create_task(self._heartbeat_loop(), name="workflows-heartbeat")]
        if self.watch:
            helpers.append(asyncio.create_task(self.store.watch(self._poke), name="workflows-watch"))
        if self.observers:
            sampling = housekeeping.sample(self.observers, self._sample)
            helpers.append(asyncio.create_task(sampling, name="workflows-sample"))
        for seconds, job in self.periodic:
            periodic = housekeeping.every(seconds, job, owner=self.owner, stopping=lambda: self._stopping)
            helpers.append(asyncio.create_task(periodic, name="workflows-periodic"))
        # Fires due schedules at their time and on every schedule check, whatever the claim loop does.
        helpers.append(
            asyncio.create_task(
                self.scheduler.run(every=self.schedule_check, wake=self._poke), name="workflows-cron"
            )
        )
        logger.info("runner %s started (concurrency %d)", self.owner, self.concurrency)
        try:
            failures = 0
            while not self._stopping:
                self._wake.clear()
                try:
                    if self.roster.due_to_announce():
                        await self.roster.announce()
                    await self._unpark_held()
                    await slots.gather(self._wake, self._free, concurrency=self.concurrency)
                    claimed, free = await self._claim()
                    if claimed and claimed == free:
                        continue  # a full batch: more may be due
                    timeout = await self._idle_timeout(until_idle)
                    failures = 0
                except Exception as exc:  # the database away (a restart, a partition): try again
                    failures += 1
                    pause = min(STORE_RETRY_MAX, STORE_RETRY_BASE * 2 ** (failures - 1))
                    if await housekeeping.pause_after_failure(exc, self.owner, pause, self._wake):
                        failures = 0  # woken (the LISTEN connection is back): pauses start short again
                    continue
                if until_idle and not self._tasks and (timeout is None or timeout > UNTIL_IDLE_HORIZON):
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
        finally:
            await self._drain_on_stop()
            if self._clock_read is not None:
                helpers.append(self._clock_read)
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            await self.roster.withdraw()
            logger.info(
                "runner %s stopped (%d runs taken in %d claims)", self.owner, self.claimed, self.claims
            )

    async def run_due(self) -> None:
        """Claim and execute until nothing is due at the clock's time (workflows.testing uses it)."""
        self._wake = self._wake or asyncio.Event()
        self.leases.enabled = False  # no heartbeats here: one process, time driven by the caller
        await self._unpark_held()
        while True:
            claimed, _free = await self._claim()
            if not claimed and not self._tasks:
                return
            if self._tasks:
                await asyncio.wait(list(self._tasks.values()))

    async def _unpark_held(self) -> None:
        """Once, before the first claim: the runs of our workflows that claims set aside in full
        groups come back in line. This runner's code may have raised a `max` or removed a
        `concurrency` (a deploy): they would otherwise come back only one per freed slot, and the
        new capacity never fill. The store wakes the other runners; our next claim sets aside again
        those whose group is still full, at our `max`. Tried again while the store fails."""
        if self._unparked:
            return
        count = await self.store.aunpark_held(self.registry.names())
        self._unparked = True
        if count:
            logger.info("runner %s: %d run(s) set aside in full groups put back in line", self.owner, count)

    def _free(self) -> int:
        """Free slots; none once stopping (a stopping runner claims nothing more)."""
        return 0 if self._stopping else self.concurrency - len(self._tasks)

    async def _claim(self) -> tuple[int, int]:
        """Claim what is due, up to the free capacity; returns (claimed, free)."""
        free = self._free()
        if free <= 0:
            return 0, 0
        now = self.clock.now()
        self._claiming = free  # slots a start must leave to this claim while it is in flight
        sent = self.leases.now()
        try:
            runs = await self.store.aclaim(
                owner=self.owner,
                workflows=self.registry.names(),
                limit=free,
                lease_seconds=self.lease_seconds,
                now=now,
                concurrency=self._caps,
            )
        finally:
            self._claiming = 0
        while self._timers and self._timers[0] <= now:  # due timers were just claimed (or taken)
            heapq.heappop(self._timers)
        self.leases.renewed([run.id for run in runs], sent)
        self.claims, self.claimed = self.claims + 1, self.claimed + len(runs)
        for run in runs:
            self._tasks[run.id] = asyncio.create_task(self._execute(run), name=f"run-{run.id}")
        return len(runs), free

    async def _idle_timeout(self, until_idle: bool) -> float | None:
        """Seconds until the next wake we know of (None: none), from the timers of our own runs;
        the store's whole schedule (runs of dead runners, lapsed leases) is read only every
        `schedule_check` seconds, so an idle runner costs next to no queries."""
        if len(self._tasks) >= self.concurrency:
            return IDLE_POLL  # full: a finishing task wakes us
        loop = asyncio.get_running_loop()
        if loop.time() >= self._next_schedule_check or (until_idle and not self._tasks):
            await self.roster.look_around()
            # Runs due in a full group are not waited for: a slot's release wakes us (a finishing
            # run of ours, or another runner's NOTIFY), else its holder's lease expiry does.
            when = await self.store.anext_wake_at(
                owner=self.owner, workflows=self.registry.names(), concurrency=self._caps
            )
            if when is not None:
                heapq.heappush(self._timers, when)
            self._next_schedule_check = loop.time() + self.schedule_check
        until_check = max(0.0, self._next_schedule_check - loop.time())
        if not self._timers:
            return None if until_idle and not self._tasks else until_check
        return min(until_check, max(0.0, (self._timers[0] - self.clock.now()).total_seconds()))

    async def _execute(self, run: RunRecord) -> None:
        """A claimed run's task: executed (engine.executor), then its slot is free again."""
        try:
            await self.executor.execute(run)
        finally:
            self._tasks.pop(run.id, None)
            self.leases.forget(run.id)
            self._poke()

    # --- presence (engine.roster) -------------------------------------------------------------

    @property
    def clock_offset(self) -> float | None:
        """Seconds this host's wall clock is ahead of the database's, as last measured."""
        return self.roster.clock_offset

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            if self._clock_read is None or self._clock_read.done():  # a slow read delays no heartbeat
                self._clock_read = asyncio.create_task(self.roster.read_clock(), name="workflows-clock")
            await self.roster.refresh()
            ids = list(self._tasks)
            if not ids:
                continue
            try:
                sent = self.leases.now()
                held = await self.store.aheartbeat(
                    owner=self.owner, run_ids=ids, lease_seconds=self.lease_seconds, now=self.clock.now()
                )
            except Exception as exc:  # the database away (StoreUnavailable, expected) in one line
                expected = isinstance(exc, StoreUnavailable)
                level = logging.WARNING if expected else logging.ERROR  # ERROR, as it always was
                logger.log(level, "runner %s: heartbeat failed: %s", self.owner, exc, exc_info=not expected)
                continue
            self.leases.renewed(held, sent)
            for run_id in ids:
                execution = self.executor.executions.get(run_id)
                if run_id not in held:
                    task = self._tasks.get(run_id)
                    if task is not None and execution is not None:
                        logger.warning("run %s: lease lost; stopping its execution", run_id)
                        task.cancel()
                elif held[run_id] and execution is not None:
                    execution.request_cancel()

    def _sample(self, loop_lag: float) -> RunnerSample:
        used = len(self._tasks)
        return RunnerSample(
            owner=self.owner,
            slots_used=used,
            slots_free=max(0, self.concurrency - used),
            loop_lag=loop_lag,
            clock_offset=self.clock_offset,
        )

    async def _drain_on_stop(self) -> None:
        if not self._tasks:
            return
        for execution in self.executor.executions.values():
            execution.interrupt_requested = True
        pending = list(self._tasks.values())
        _done, still = await asyncio.wait(pending, timeout=self.shutdown_grace)
        if still:
            ids = [run_id for run_id, task in self._tasks.items() if task in still]
            logger.warning("cutting %d runs still in a step after %.0fs", len(ids), self.shutdown_grace)
            for task in still:
                task.cancel()
            await asyncio.gather(*still, return_exceptions=True)
            await self.store.arelease(owner=self.owner, run_ids=ids, now=self.clock.now())
