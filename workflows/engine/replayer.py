"""Replay a stored history against the current code without running or writing anything: the
pre-deploy check that tells which live runs the new code would fail with HistoryDiverged.

The dry run is an Execution with `dry_run=True`: it walks recorded entries exactly as a resume
would and stops at the first entry that would have to run (its frontier). No step body runs,
nothing is committed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.clock import Clock
from ..core.exceptions import DuplicateEntryName, HistoryDiverged, UnknownWorkflow
from ..core.records import EntryRecord, RunRecord
from ..core.signals import Frontier, Unwind
from ..storage.memory import MemoryStore
from .execution import Execution
from .registry import Registry


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

    def _dry(self, run: RunRecord, history: list[EntryRecord]) -> Execution:
        return Execution(
            run=run,
            definition=self.registry.for_run(run.workflow, run.version),
            registry=self.registry,
            history=history,
            store=MemoryStore(),  # never written: a dry run stops before any commit
            clock=self.clock,
            owner="checkreplay",
            dry_run=True,
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
