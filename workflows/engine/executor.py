"""How the runner executes one run it claimed: record the attempts its last execution lost, leave a
version this code lacks to a runner that knows it, execute it from its history, and, when the store
fails mid-way, execute it again once the store answers while this runner still holds its lease.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import heapq
import logging
from collections.abc import Callable
from dataclasses import replace

from ..core.clock import Clock
from ..core.exceptions import LeaseLost, StoreUnavailable
from ..core.records import Commit, RunRecord, RunStatus, Transition
from ..storage.base import Store
from . import defaults, presence
from .execution import Ended, Execution
from .leases import LeaseWatch
from .observers import Observer
from .registry import Registry
from .roster import Roster, cut_off_by

logger = logging.getLogger("workflows.engine.runner")  # the runner's own log, as operators filter it


class Executor:
    """Executes the runs of one runner (`execute(run)`, one task each); `executions` are the live
    ones, which the runner's heartbeat and stop reach."""

    def __init__(
        self,
        *,
        registry: Registry,
        store: Store,
        clock: Clock,
        owner: str,
        lease_seconds: float,
        leases: LeaseWatch,
        roster: Roster,
        observers: Observer,
        commit_observers: Observer,
        stopping: Callable[[], bool],
        timers: list[dt.datetime],
        retry_base: float,
        retry_max: float,
        defer_seconds: float,
    ) -> None:
        self.registry = registry
        self.store = store
        self.clock = clock
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.leases = leases
        self.roster = roster
        self.observers = observers
        self.commit_observers = commit_observers  # told of each commit of each run, once
        self.stopping = stopping  # the runner stops: no more retries, executions hand runs back
        self.timers = timers  # the runner's heap of wake times of the runs it suspended
        self.retry_base = retry_base  # seconds: first pause after the store failed, doubling ...
        self.retry_max = retry_max  # seconds: ... up to this
        self.defer_seconds = defer_seconds  # how long a run of an unknown version waits for another
        self.executions: dict[str, Execution] = {}
        self._deferred: set[tuple[str, str]] = set()  # (workflow, version) left to others, said once

    async def execute(self, run: RunRecord) -> None:
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
                if outcome.status != "abandoned" or self.stopping():
                    break
                failures += 1
                delay = min(self.retry_max, self.retry_base * 2 ** (failures - 1))
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

    async def _execute_once(self, run: RunRecord) -> Ended:
        claimed_at = self.clock.now()
        if run.taken_over:  # the last execution was cut off: record what it lost first
            await self.store.arecover_cut_attempts(
                run.id,
                owner=self.owner,
                reason=cut_off_by(run, self.roster.dead),
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
            on_commit=functools.partial(self.commit_observers.committed, run),
            sync_step_runner=defaults.sync_step_runner(),
            messages=messages,
            lease_held=lambda: self.leases.held(run.id),
        )
        execution.interrupt_requested = self.stopping()
        self.executions[run.id] = execution
        self.observers.execution_started(run, owner=self.owner, claimed_at=claimed_at)
        outcome = Ended("abandoned")  # unless the execution says otherwise
        try:
            outcome = await execution.execute()
        finally:
            self.executions.pop(run.id, None)
            self.observers.execution_ended(run, status=outcome.status, wake_at=outcome.wake_at)
        if execution.lease_doubted:
            await self._hand_back(run.id)
        if outcome.wake_at is not None:
            heapq.heappush(self.timers, outcome.wake_at)
        logger.debug("run %s: %s", run.id, outcome.status)
        return outcome

    async def _defer_unknown_version(self, run: RunRecord) -> bool:
        """A run of a version this runner's code lacks, which a live runner knows (newer code in a
        rolling deploy): put it back, due in DEFER_SECONDS, for a runner that knows it."""
        knower = presence.knower_of(
            run.workflow, run.version, self.registry.versions(), self.roster.runners, self.clock.now()
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
        later = self.clock.now() + dt.timedelta(seconds=self.defer_seconds)
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
        while not self.stopping():
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
                await asyncio.sleep(min(self.retry_max, self.retry_base * 2**failures))
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
