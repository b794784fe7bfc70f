"""Replay a stored history against the current code without running or writing anything: the
pre-deploy check that tells which live runs the new code would fail with HistoryDiverged.

The dry run walks recorded entries exactly as a resume would and stops at the first entry that
would have to run (the frontier). No step body runs, nothing is committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .clock import Clock
from .context import RunContext
from .definition import Registry
from .exceptions import DuplicateEntryName, HistoryDiverged, UnknownWorkflow
from .executor import SETTLED, Execution, Suspend, _Unwind
from .memory_store import MemoryStore
from .records import CommitResult, EntryKind, EntryRecord, RunRecord
from .replay import Slot

_LEAVES = (EntryKind.STEP, EntryKind.SLEEP, EntryKind.QUEUE)


class _Frontier(Suspend):
    """The first entry that would run: everything before it replayed cleanly. A Suspend, so a join
    branch that reaches its frontier waits while the other branches are still checked."""

    def __init__(self, where: str) -> None:
        super().__init__(None, ())
        self.where = where


@dataclass(frozen=True)
class ReplayReport:
    run_id: str
    workflow: str
    diverged: bool
    detail: str  # where the dry run stopped, or the divergence


class _DryRun(Execution):
    frontier: str | None = None  # the first frontier reached, for the report

    def _stop(self, where: str) -> _Frontier:
        self.frontier = self.frontier or where
        return _Frontier(where)

    def _enter(self, scope: str, name: str, kind: str) -> Slot:
        slot = super()._enter(scope, name, kind)
        if kind in _LEAVES and (slot.recorded is None or slot.recorded.status not in SETTLED):
            raise self._stop(f"{kind} {name!r}" + (f" in {scope!r}" if scope else ""))
        return slot

    async def _commit(self, commit: Any) -> CommitResult:
        raise self._stop("a new record")


async def check_history(
    run: RunRecord, history: list[EntryRecord], registry: Registry, clock: Clock | None = None
) -> ReplayReport:
    try:
        definition = registry.for_run(run.workflow, run.version)
    except UnknownWorkflow:
        return ReplayReport(
            run.id, run.workflow, True, f"workflow {run.workflow!r} is not in the current code"
        )
    dry = _DryRun(
        run=run,
        definition=definition,
        registry=registry,
        history=history,
        store=MemoryStore(),  # never written: commits stop the dry run
        clock=clock or Clock(),
        owner="checkreplay",
    )
    dry.cancel_requested = dry.interrupt_requested = False
    try:
        await definition.run(RunContext(dry))
        if dry.fatal is not None:
            raise dry.fatal
        dry.history.check_finished("")
        outcome = "replays to its end"
    except _Frontier as frontier:
        outcome = f"replays cleanly up to {frontier.where}"
    except (HistoryDiverged, DuplicateEntryName) as exc:
        return ReplayReport(run.id, run.workflow, True, str(exc))
    except _Unwind:  # every branch of a join reached its frontier
        outcome = f"replays cleanly up to {dry.frontier or 'a wait'}"
    except Exception as exc:
        outcome = f"replays to its recorded failure ({type(exc).__name__})"
    # A branch may have diverged while the others went on to a wait or a failure.
    if isinstance(dry.fatal, HistoryDiverged | DuplicateEntryName):
        return ReplayReport(run.id, run.workflow, True, str(dry.fatal))
    return ReplayReport(run.id, run.workflow, False, outcome)
