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
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..core.clock import AnchoredClock, Clock
from ..core.exceptions import LeaseLost, StoreUnavailable
from ..core.records import Commit, RunnerRecord, RunRecord, RunStatus, Transition
from ..storage.base import Store
from ..telemetry.tracing import producer_span
from . import defaults, presence
from .client import RunHandle
from .execution import Ended, Execution
from .leases import LeaseWatch
from .observers import Observer, Observers, RunnerSample
from .registry import Registry
from .scheduler import Scheduler

logger = logging.getLogger(__name__)

CommitHook = Callable[[str, Commit], Awaitable[None]]
# Housekeeping the runner does on its own every `seconds` (e.g. pruning finished runs): (seconds, job).
Periodic = tuple[float, Callable[[], Awaitable[object]]]

IDLE_POLL = 30.0  # seconds: longest sleep between reads of the store's schedule
UNTIL_IDLE_HORIZON = 2.0  # seconds: --until-idle waits for runs due this soon (short retry backoffs)
SHUTDOWN_GRACE = 30.0  # seconds: how long a stopping runner lets running steps finish
STORE_RETRY_BASE = 0.5  # seconds: first pause after the store failed, doubling ...
STORE_RETRY_MAX = 30.0  # seconds: ... up to this
RUN_RETRY_MAX = 2.0  # seconds: an abandoned run is tried again at least this often
SAMPLE_EVERY = 5.0  # seconds between the runner's samples of its slots and loop lag (observers)
FORGET_RUNNERS_AFTER = dt.timedelta(days=1)  # presence records of runners dead this long go
CLOCK_WARN_OFFSET = 1.0  # seconds: a host wall clock this far off the database's is logged
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
        self.commit_hooks = list(commit_hooks or [])
        self.periodic = list(periodic)
        self._hook_tasks: set[asyncio.Task[None]] = set()
        self.observers = Observers(observers or [])
        self.observers.attached(clock=self.clock)
        # Wake times of the runs this runner suspended: it wakes for them without asking the store.
        self._timers: list[dt.datetime] = []
        self.schedule_check = min(IDLE_POLL, lease_seconds / 2)  # seconds between reads of the schedule
        self._next_schedule_check = 0.0
        self.scheduler = Scheduler(registry=registry, store=store, clock=self.clock)  # cron schedules
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._executions: dict[str, Execution] = {}
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._presence: RunnerRecord | None = None  # as registered in the store
        self._unserved: set[str] = set()  # workflows already reported as served by no live runner
        self._runners: list[RunnerRecord] = []  # every runner's presence, as last read
        self._deferred: set[tuple[str, str]] = set()  # (workflow, version) left to others, said once
        self._dead: set[str] = set()  # runners of this host found dead: their runs were taken over
        self._announce_at = 0.0  # loop time of the next try to record this runner's presence
        self._caps = registry.concurrency_caps()  # workflow -> max runs of a group at once
        self._unparked = False  # runs set aside under older code put back in line (at start)
        self._claiming = 0  # free slots a claim in flight may fill (`start` leaves them to it)
        self.leases = LeaseWatch(lease_seconds, enabled=stall_check)  # our leases' renewal times
        self._clock_off = False  # this host's wall clock was last seen off the database's
        self._clock_read: asyncio.Task[None] | None = None  # the heartbeat's read of the time

    # --- control ---------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop claiming; running executions hand their run back at their next entry."""
        self._stopping = True
        for execution in self._executions.values():
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
        args = client.start_args(key, state, "existing", None, priority)
        hold = (
            not self._stopping
            and workflow not in self._caps
            and args["concurrency_group"] is None
            and len(self._tasks) + self._claiming < self.concurrency
        )
        held = False
        with producer_span("start", workflow) as producer:
            if hold:
                del args["concurrency_group"]
                sent = self.leases.now()
                run, created, held = await self.store.aget_or_create_held_run(
                    owner=self.owner, lease_seconds=self.lease_seconds, **args, trace_context=producer.carrier
                )
                if held:
                    self.leases.renewed([run.id], sent)
            else:
                run, created = await self.store.aget_or_create_run(**args, trace_context=producer.carrier)
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
        await self._read_clock()
        await self._read_clock()
        helpers = [asyncio.create_task(self._heartbeat_loop(), name="workflows-heartbeat")]
        if self.watch:
            helpers.append(asyncio.create_task(self.store.watch(self._poke), name="workflows-watch"))
        if self.observers:
            helpers.append(asyncio.create_task(self._sample_loop(), name="workflows-sample"))
        for seconds, job in self.periodic:
            helpers.append(asyncio.create_task(self._every(seconds, job), name="workflows-periodic"))
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
                    if self._presence is None and asyncio.get_running_loop().time() >= self._announce_at:
                        await self._announce()
                    await self._unpark_held()
                    claimed, free = await self._claim()
                    if claimed and claimed == free:
                        continue  # a full batch: more may be due
                    timeout = await self._idle_timeout(until_idle)
                    failures = 0
                except Exception:
                    # The database is away (a restart, a failover): keep the process, try again.
                    failures += 1
                    timeout = min(STORE_RETRY_MAX, STORE_RETRY_BASE * 2 ** (failures - 1))
                    logger.exception("runner %s: the store failed; retrying in %.1fs", self.owner, timeout)
                    await asyncio.sleep(timeout)
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
            await self._withdraw()
            logger.info("runner %s stopped", self.owner)

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

    async def _claim(self) -> tuple[int, int]:
        """Claim what is due, up to the free capacity; returns (claimed, free)."""
        free = self.concurrency - len(self._tasks)
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
            await self._look_around()
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
        """Execute a claimed run. When the store fails mid-way (connection lost, server
        restarting) the execution is abandoned as if this runner had crashed there; the run is
        not failed: this runner, still holding the lease, executes it again as soon as the store
        answers, from the history that did land. Another runner takes over if the lease lapses."""
        failures = 0
        try:
            while True:
                try:
                    outcome = await self._execute_once(run)
                except StoreUnavailable:
                    outcome = Ended("abandoned")
                if outcome.status != "abandoned" or self._stopping:
                    break
                failures += 1
                delay = min(RUN_RETRY_MAX, STORE_RETRY_BASE * 2 ** (failures - 1))
                logger.warning("run %s: the store failed mid-execution; resuming it in %.1fs", run.id, delay)
                await asyncio.sleep(delay)
                resumed = await self._retake(run.id)
                if resumed is None:
                    break
                run = resumed
        except asyncio.CancelledError:
            raise
        except LeaseLost:  # taken over by another runner before this one began: nothing to do
            logger.info("run %s: held by another runner now; leaving it", run.id)
        except Exception:
            logger.exception("run %s: execution failed; its lease will lapse", run.id)
        finally:
            self._tasks.pop(run.id, None)
            self.leases.forget(run.id)
            self._poke()

    async def _execute_once(self, run: RunRecord) -> Ended:
        claimed_at = self.clock.now()
        if run.taken_over:  # the last execution was cut off: record what it lost first
            await self.store.arecover_cut_attempts(
                run.id,
                owner=self.owner,
                reason=_cut_off_by(run, self._dead),
                lost_at=run.lease_lapsed_at,
                now=self.clock.now(),
            )
        if await self._defer_unknown_version(run):
            return Ended("deferred")
        history, messages = ([], None) if run.fresh else await self.store.aload_resume(run.id)
        execution = Execution(
            run=run,
            definition=self.registry.for_run(run.workflow, run.version),
            registry=self.registry,
            history=history,
            store=self.store,
            clock=self.clock,
            owner=self.owner,
            on_commit=lambda commit: self._on_commit(run, commit),
            sync_step_runner=defaults.sync_step_runner(),
            messages=messages,
            lease_held=lambda: self.leases.held(run.id),
        )
        execution.interrupt_requested = self._stopping
        self._executions[run.id] = execution
        self.observers.execution_started(run, owner=self.owner, claimed_at=claimed_at)
        outcome = Ended("abandoned")  # unless the execution says otherwise
        try:
            outcome = await execution.execute()
        finally:
            self._executions.pop(run.id, None)
            self.observers.execution_ended(run, status=outcome.status, wake_at=outcome.wake_at)
        if execution.lease_doubted:
            await self._hand_back(run.id)
        if outcome.wake_at is not None:
            heapq.heappush(self._timers, outcome.wake_at)
        logger.debug("run %s: %s", run.id, outcome.status)
        return outcome

    async def _defer_unknown_version(self, run: RunRecord) -> bool:
        """A run of a version this runner's code lacks, which a live runner knows (newer code in a
        rolling deploy): put it back, due in DEFER_SECONDS, for a runner that knows it."""
        knower = presence.knower_of(
            run.workflow, run.version, self.registry.versions(), self._runners, self.clock.now()
        )
        if knower is None:
            return False
        if (run.workflow, run.version) not in self._deferred:
            self._deferred.add((run.workflow, run.version))
            logger.warning(
                "runner %s: runs of %s version %r are left to runners that know that version (%s):"
                " this runner's code has %s",
                self.owner, run.workflow, run.version, knower.owner,
                ", ".join(map(repr, self.registry.versions().get(run.workflow, []))),
            )  # fmt: skip
        later = self.clock.now() + dt.timedelta(seconds=DEFER_SECONDS)
        try:
            await self.store.acommit(
                run_id=run.id,
                owner=self.owner,
                commit=Commit(transition=Transition(status=RunStatus.PENDING, wake_at=later)),
                now=self.clock.now(),
            )
        except (LeaseLost, StoreUnavailable):
            pass  # not ours any more, or its lease lapses on its own
        return True

    async def _hand_back(self, run_id: str) -> None:
        """After this runner stopped a run for a lease that may have lapsed: if the run is still
        ours after all (no one took it over while we were away), make it runnable at once rather
        than leave it held until its lease runs out. A no-op when another runner holds it."""
        try:
            await self.store.arelease(owner=self.owner, run_ids=[run_id], now=self.clock.now())
        except Exception as exc:  # its lease lapses on its own
            logger.warning("run %s: could not hand it back (%s); its lease lapses on its own", run_id, exc)

    async def _retake(self, run_id: str) -> RunRecord | None:
        """After the store failed: the run as stored now (its state moved with what did land) if
        this runner still holds its lease, which is renewed on the way; None when the run is no
        longer ours (its lease lapsed and another runner took it, or it has ended). Waits while
        the store is still away."""
        failures = 0
        while not self._stopping:
            try:
                sent = self.leases.now()
                held = await self.store.aheartbeat(
                    owner=self.owner, run_ids=[run_id], lease_seconds=self.lease_seconds, now=self.clock.now()
                )
                self.leases.renewed(held, sent)
                if run_id not in held:
                    logger.warning("run %s: no longer held by this runner after the store failed", run_id)
                    return None
                run = await self.store.aget_run(run_id)
            except StoreUnavailable:
                failures += 1
                await asyncio.sleep(min(RUN_RETRY_MAX, STORE_RETRY_BASE * 2**failures))
                continue
            return replace(
                run,
                fresh=False,
                taken_over=True,
                previous_owner="",  # this runner: the store failed under it
                lease_lapsed_at=self.clock.now(),
                cancel_requested=run.cancel_requested or held[run_id],
            )
        return None

    def _on_commit(self, run: RunRecord, commit: Commit) -> None:
        run_id = run.id
        self.observers.committed(run, commit)
        if commit.messages:
            self._poke()  # we may have created or woken a run; stores don't notify their own writes
        for hook in self.commit_hooks:
            task = asyncio.create_task(self._call_hook(hook, run_id, commit))
            self._hook_tasks.add(task)
            task.add_done_callback(self._hook_tasks.discard)

    @staticmethod
    async def _call_hook(hook: CommitHook, run_id: str, commit: Commit) -> None:
        try:
            await hook(run_id, commit)
        except Exception:
            logger.exception("commit hook %r failed (ignored)", hook)

    async def _every(self, seconds: float, job: Callable[[], Awaitable[object]]) -> None:
        """Call `job` every `seconds`, the first time at a random point of the first interval, so
        runners started together do not all do it at once. A failure is logged and waits its turn."""
        await asyncio.sleep(random.uniform(0, seconds))
        while not self._stopping:
            try:
                await job()
            except Exception:
                logger.exception("runner %s: periodic %r failed; next in %.0fs", self.owner, job, seconds)
            await asyncio.sleep(seconds)

    # --- presence ---------------------------------------------------------------------------------

    async def _announce(self) -> None:
        """Record this runner's presence, forget runners dead for long, and look around at once:
        a restarted runner takes its dead predecessor's runs before its first claim. Presence
        serves operators and takeovers, never the runner's own work: when it cannot be recorded
        the runner goes on and tries again at its next read of the schedule."""
        now = self.clock.now()
        me = presence.describe_self(
            owner=self.owner,
            workflows=self.registry.versions(),
            lease_seconds=self.lease_seconds,
            concurrency=self.concurrency,
            now=now,
            clock_offset=self.clock_offset,
        )
        try:
            await self.store.aregister_runner(me)
            self._presence = me
            await self.store.aforget_runners(seen_before=now - FORGET_RUNNERS_AFTER)
        except Exception as exc:
            self._announce_at = asyncio.get_running_loop().time() + self.schedule_check
            logger.warning("runner %s: presence not recorded (trying again later): %s", self.owner, exc)
            return
        await self._look_around()

    async def _look_around(self) -> None:
        """On each read of the schedule: take over the runs of this host's dead runners, and say
        once per workflow when runs are due that no live runner knows (they would wait silently).
        A failure is logged and left for the next read: the runner's own work goes on."""
        if self._presence is None:
            return
        try:
            await self._take_over_and_report(self._presence)
        except Exception as exc:
            logger.warning(
                "runner %s: could not look for dead runners and unserved runs: %s", self.owner, exc
            )

    async def _take_over_and_report(self, me: RunnerRecord) -> None:
        now = self.clock.now()
        runners = self._runners = await self.store.alist_runners()
        for dead in presence.dead_predecessors(me, runners):
            expired = await self.store.aexpire_leases(dead.owner, lapsed_at=dead.last_seen, now=now)
            self._dead.add(dead.owner)
            await self.store.aunregister_runner(dead.owner)
            logger.warning(
                "runner %s: runner %s (pid %d on this host) is gone; taking over its %d run(s) now",
                self.owner,
                dead.owner,
                dead.pid,
                expired,
            )
        due = await self.store.adue_elsewhere(self.registry.names(), now=now)
        served = presence.serving(runners, now)
        unserved = {name: n for name, n in due.items() if name not in served}
        for name in sorted(set(unserved) - self._unserved):
            logger.warning(
                "%d run(s) of workflow %r are due and no live runner knows that workflow"
                " (this runner serves %s): they wait until a runner that registers it starts",
                unserved[name],
                name,
                ", ".join(self.registry.names()) or "nothing",
            )
        self._unserved = set(unserved)

    async def _refresh_presence(self) -> None:
        if self._presence is None:
            return
        now, offset = self.clock.now(), self.clock_offset
        try:
            if not await self.store.atouch_runner(self.owner, now=now, clock_offset=offset):
                # forgotten (taken for dead): announce again
                await self.store.aregister_runner(replace(self._presence, last_seen=now, clock_offset=offset))
        except Exception as exc:
            logger.warning("runner %s: presence not refreshed: %s", self.owner, exc)

    async def _withdraw(self) -> None:
        if self._presence is None:
            return
        try:
            await self.store.aunregister_runner(self.owner)
        except Exception as exc:
            logger.warning("runner %s: presence not removed (it shows as dead later): %s", self.owner, exc)
        self._presence = None

    # --- the clock ------------------------------------------------------------------------------

    @property
    def clock_offset(self) -> float | None:
        """Seconds this host's wall clock is ahead of the database's, as last measured."""
        return self.clock.wall_offset if isinstance(self.clock, AnchoredClock) else None

    async def _read_clock(self) -> None:
        """Anchor the runner's clock to the database's time again (each heartbeat), and say when
        this host's wall clock is off: nothing the runner decides rests on it, but logs, traces and
        the host's other programs do."""
        if not isinstance(self.clock, AnchoredClock):
            return
        anchor = await self.clock.arefresh(quiet=True)
        if anchor is None:
            return
        off = abs(anchor.wall_offset) > CLOCK_WARN_OFFSET
        if off and not self._clock_off:
            logger.warning(
                "runner %s: this host's wall clock is %+.1fs off the database's; the runner takes its"
                " decisions on the database's clock, but fix the host's time (NTP)",
                self.owner,
                anchor.wall_offset,
            )
        self._clock_off = off

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            if self._clock_read is None or self._clock_read.done():  # a slow read delays no heartbeat
                self._clock_read = asyncio.create_task(self._read_clock(), name="workflows-clock")
            await self._refresh_presence()
            ids = list(self._tasks)
            if not ids:
                continue
            try:
                sent = self.leases.now()
                held = await self.store.aheartbeat(
                    owner=self.owner, run_ids=ids, lease_seconds=self.lease_seconds, now=self.clock.now()
                )
            except Exception:
                logger.exception("heartbeat failed")
                continue
            self.leases.renewed(held, sent)
            for run_id in ids:
                execution = self._executions.get(run_id)
                if run_id not in held:
                    task = self._tasks.get(run_id)
                    if task is not None and execution is not None:
                        logger.warning("run %s: lease lost; stopping its execution", run_id)
                        task.cancel()
                elif held[run_id] and execution is not None:
                    execution.request_cancel()

    async def _sample_loop(self) -> None:
        """Tell observers this runner's slots and how late its event loop wakes (a step body
        that blocks the loop shows up here as lag)."""
        loop = asyncio.get_running_loop()
        while True:
            expected = loop.time() + SAMPLE_EVERY
            await asyncio.sleep(SAMPLE_EVERY)
            used = len(self._tasks)
            self.observers.runner_sampled(
                RunnerSample(
                    owner=self.owner,
                    slots_used=used,
                    slots_free=max(0, self.concurrency - used),
                    loop_lag=max(0.0, loop.time() - expected),
                    clock_offset=self.clock_offset,
                )
            )

    async def _drain_on_stop(self) -> None:
        if not self._tasks:
            return
        for execution in self._executions.values():
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


def _cut_off_by(run: RunRecord, dead: Collection[str] = ()) -> str:
    """Why the attempts of a run's last execution were cut off, for the lost attempts' record;
    `dead`: the runners whose process this runner saw gone (a same-host takeover)."""
    if not run.previous_owner:
        return "the database failed under the runner"
    if run.previous_owner in dead:
        seen = f" (last seen at {run.lease_lapsed_at:%H:%M:%S} UTC)" if run.lease_lapsed_at else ""
        return f"runner {run.previous_owner} died{seen}: its process on this host is gone, so its runs were taken over at once"
    lapsed = f" (its lease lapsed at {run.lease_lapsed_at:%H:%M:%S} UTC)" if run.lease_lapsed_at else ""
    return f"runner {run.previous_owner} stopped responding{lapsed}"
