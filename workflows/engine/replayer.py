"""Replay a stored history against the current code without running or writing anything: the
pre-deploy check that tells which live runs the new code would fail with HistoryDiverged.

The dry run (`DryRun`) drives the same primitives as an execution, over the same `body.RunBody`,
with no store and no execution: it walks recorded entries exactly as a resume would and stops at
the first entry that would have to run (its frontier). No step body runs, nothing is written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from ..core.clock import Clock
from ..core.exceptions import DuplicateEntryName, HistoryDiverged, UnknownWorkflow
from ..core.limits import Limiter
from ..core.records import (
    ChildStart,
    Commit,
    CommitResult,
    EntryKind,
    EntryRecord,
    EntryWrite,
    EventOrigin,
    MessageRecord,
    RunRecord,
)
from ..core.replay import Decision
from ..core.signals import Frontier, Unwind
from .body import RunBody
from .commits import record_of
from .context import RunContext
from .registry import Registry

LEAF_KINDS = (EntryKind.STEP, EntryKind.SLEEP, EntryKind.QUEUE)  # entries that do work or wait


class DryRun(RunBody):
    """A run's body replayed with nothing behind it: every entry the history settles replays, the
    first that would do work or wait (or write anything) raises `Frontier`, and `frontier` says
    where that was. Markers and branches on the way are kept in the history alone."""

    frontier: str | None = None  # where the dry run stopped first

    def context(self, scope: str) -> RunContext:
        return RunContext(self, scope)

    def enter(self, scope: str, name: str, kind: str, *, input: Any = None) -> Decision:
        decision = self.decide(scope, name, kind, input)
        if not decision.settled and not self.compensating and kind in LEAF_KINDS:
            raise self._frontier(f"{kind} {name!r}" + (f" in {scope!r}" if scope else ""))
        return decision

    def _frontier(self, where: str) -> Frontier:
        self.frontier = self.frontier or where
        return Frontier(where)

    def commit(self, commit: Commit) -> Awaitable[CommitResult]:
        raise self._frontier("a new record")

    def hold_exhausted(self, step: str) -> None:
        """Never reached: a dry run stops at its frontier, before any step runs."""

    def commit_early(self, commit: Commit) -> bool:
        return False

    def add_pending(self, write: EntryWrite) -> None:
        self.history.record(record_of(write, write.id))

    def add_pending_child(self, write: EntryWrite, start: ChildStart) -> None:
        self.add_pending(write)

    async def available_messages(self, queues: list[str] | None, limit: int) -> list[MessageRecord]:
        return []  # none were read: a wait for one stays a wait

    async def find_run(self, workflow: str, key: list[str]) -> RunRecord | None:
        return None

    async def cancel_run(self, run_id: str) -> NoReturn:
        raise self._frontier("a cancel of a child")

    async def acquire_limit(self, limiter: Limiter, *, holder: str, expires_at: dt.datetime) -> NoReturn:
        raise self._frontier(f"limiter {limiter.name!r}")

    async def release_limit(self, slot: int, meta: Any) -> None:
        pass

    async def drain_live_events(self) -> None:
        pass

    def broadcast_from_body(self, scope: str, event: str, payload: Any) -> None:
        self.validate_event(event, payload)

    def broadcast_live(self, event: str, payload: Any, origin: EventOrigin) -> None:
        self.validate_event(event, payload)

    def open_stream(
        self, origin: EventOrigin, name: str, *, stored: Callable[[], None] | None = None
    ) -> NoReturn:
        raise self._frontier(f"stream {name!r}")


@dataclass(frozen=True)
class Compensations:
    """What a cancel of a run would compensate, from a dry replay of its history: `steps` whose
    rollbacks run, in the order they run (newest first); `known` False (with `detail`) when the
    dry replay could not tell (the workflow is not in this code, or its history diverged)."""

    steps: tuple[str, ...] = ()
    known: bool = True
    detail: str = ""


@dataclass(frozen=True)
class ReplayReport:
    run_id: str
    workflow: str
    diverged: bool
    detail: str  # where the dry run stopped, or the divergence


class Replayer:
    """Checks stored histories against the workflows of `registry` (the code checked out here)."""

    def __init__(self, registry: Registry, clock: Clock | None = None) -> None:
        self.registry = registry
        self.clock = clock or Clock()

    def _dry(self, run: RunRecord, history: list[EntryRecord]) -> DryRun:
        return DryRun(
            run=run,
            definition=self.registry.for_run(run.workflow, run.version),
            registry=self.registry,
            history=history,
            clock=self.clock,
        )

    async def compensations(self, run: RunRecord, history: list[EntryRecord]) -> Compensations:
        """The rollbacks a cancel of `run` would run now: the dry run walks its recorded entries up
        to the first that would run, collecting the rollbacks of its completed steps (those after
        a `rollback_checkpoint`), as the real execution does before it compensates."""
        try:
            dry = self._dry(run, history)
        except UnknownWorkflow:
            return Compensations(known=False, detail=f"workflow {run.workflow!r} is not in the current code")
        try:
            await dry.definition.run(dry.context(""))
        except (HistoryDiverged, DuplicateEntryName) as exc:
            return Compensations(known=False, detail=str(exc))
        except Unwind:  # the frontier: where the run is now
            pass
        except Exception:  # the recorded failure: its compensations are the same rollbacks
            pass
        if isinstance(dry.fatal, HistoryDiverged | DuplicateEntryName):
            return Compensations(known=False, detail=str(dry.fatal))
        return Compensations(steps=tuple(dry.compensations()))

    async def check(self, run: RunRecord, history: list[EntryRecord]) -> ReplayReport:
        try:
            dry = self._dry(run, history)
        except UnknownWorkflow:
            return ReplayReport(
                run.id, run.workflow, True, f"workflow {run.workflow!r} is not in the current code"
            )
        try:
            await dry.definition.run(dry.context(""))
            dry.raise_if_fatal()
            dry.history.check_finished("")
            outcome = "replays to its end"
        except Frontier as frontier:
            outcome = f"replays cleanly up to {frontier.where}"
        except (HistoryDiverged, DuplicateEntryName) as exc:
            return ReplayReport(run.id, run.workflow, True, str(exc))
        except Unwind:  # every branch of a join reached its frontier
            outcome = f"replays cleanly up to {dry.frontier or 'a wait'}"
        except Exception as exc:
            outcome = f"replays to its recorded failure ({type(exc).__name__})"
        # A branch may have diverged while the others went on to a wait or a failure.
        if isinstance(dry.fatal, HistoryDiverged | DuplicateEntryName):
            return ReplayReport(run.id, run.workflow, True, str(dry.fatal))
        return ReplayReport(run.id, run.workflow, False, outcome)


async def compensations_on_cancel(
    run: RunRecord, history: list[EntryRecord], registry: Registry, clock: Clock | None = None
) -> Compensations:
    """The compensations a cancel of `run` would run now (`Replayer(registry).compensations`)."""
    return await Replayer(registry, clock).compensations(run, history)


async def check_history(
    run: RunRecord, history: list[EntryRecord], registry: Registry, clock: Clock | None = None
) -> ReplayReport:
    """One run's dry replay (a shortcut for `Replayer(registry, clock).check(run, history)`)."""
    return await Replayer(registry, clock).check(run, history)
