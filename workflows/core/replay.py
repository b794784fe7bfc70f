"""The replay decision, and nothing else. For each entry the code asks for, `History.enter`
checks it against the record at that position (HistoryDiverged when name or kind differ) and
decides what the primitive does:

    REPLAY  the entry completed: return its recorded value, run nothing
    RAISE   the entry failed for good: raise its recorded failure, run nothing
    WAIT    the entry is not due yet (a retry backoff, a sleep): suspend until `until`
    RUN     run it: attempt `attempt` (1 when new), over `input` (the recorded one on a resume)

Every primitive (step, sleep, queue wait, join, race, loop, try, markers, rollback) asks this
and follows the answer; none reads the record's status itself.

A run's history is a tree of scopes: the root "", and one scope per join/race branch
("/fanout.a"), loop iteration ("/poll#3") and try block. Each scope has its own positions and
its own unique names. No Django, no I/O: the most tested module of the project.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .exceptions import DuplicateEntryName, HistoryDiverged
from .records import EntryKind, EntryRecord, EntryStatus

# Kinds whose unsettled record is due at its wake_at: a step's retry, a sleep's end. A queue wait
# is not: a message may have come before its deadline, so it always looks (RUN).
TIMED_KINDS = frozenset({EntryKind.STEP, EntryKind.SLEEP})


class Action(StrEnum):
    REPLAY = "replay"
    RAISE = "raise"
    WAIT = "wait"
    RUN = "run"


@dataclass(slots=True)  # not frozen: made once per entry on the hot path, and frozen init is slow
class Decision:
    action: Action
    scope: str
    position: int
    recorded: EntryRecord | None = None
    until: dt.datetime | None = None  # WAIT: when the entry is due
    attempt: int = 1  # RUN: the attempt about to start
    input: Any = None  # RUN: what it works on (the recorded input when resuming an entry)

    @property
    def settled(self) -> bool:
        """REPLAY or RAISE: the record answers, nothing runs."""
        return self.action in (Action.REPLAY, Action.RAISE)

    @property
    def value(self) -> Any:
        """REPLAY: the recorded output. RUN on a resumed entry: its progress so far (a loop's)."""
        return self.recorded.output if self.recorded is not None else None

    @property
    def error(self) -> dict[str, Any]:
        return (self.recorded.error or {}) if self.recorded is not None else {}

    @property
    def entry_id(self) -> int | None:
        """The stored entry a RUN updates (None: a new one is written)."""
        return self.recorded.id if self.recorded is not None else None

    @property
    def started_at(self) -> dt.datetime | None:
        """When the entry's first attempt started (None for a new entry)."""
        return self.recorded.started_at if self.recorded is not None else None


def decide(scope: str, position: int, recorded: EntryRecord | None, input: Any, now: dt.datetime) -> Decision:
    """What to do with the entry at (scope, position) whose record is `recorded` (None: new)."""
    if recorded is None:
        return Decision(Action.RUN, scope, position, input=input)
    if recorded.status == EntryStatus.COMPLETED:
        return Decision(Action.REPLAY, scope, position, recorded)
    if recorded.status == EntryStatus.FAILED:
        return Decision(Action.RAISE, scope, position, recorded)
    if recorded.kind in TIMED_KINDS and recorded.wake_at is not None and recorded.wake_at > now:
        return Decision(Action.WAIT, scope, position, recorded, until=recorded.wake_at)
    # Retrying, waiting and due, or running: an attempt a crash cut short (it left no attempt
    # record). An operator may have edited the input before a rerun: the record's input wins.
    return Decision(
        Action.RUN, scope, position, recorded, attempt=recorded.attempts + 1, input=recorded.input
    )


@dataclass
class _Cursor:
    next_position: int = 0
    names: set[str] = field(default_factory=set)


def child_scope(scope: str, name: str, branch: str | None = None, iteration: int | None = None) -> str:
    """The scope of a branch (`/name.branch`), a loop iteration (`/name#3`) or a block (`/name`)."""
    path = f"{scope}/{name}"
    if branch is not None:
        return f"{path}.{branch}"
    if iteration is not None:
        return f"{path}#{iteration}"
    return path


class History:
    """A run's recorded entries, by scope and position, walked once per execution."""

    def __init__(self, run_id: str, entries: list[EntryRecord]) -> None:
        self.run_id = run_id
        self._recorded: dict[str, dict[int, EntryRecord]] = {}
        for entry in entries:
            self._recorded.setdefault(entry.scope, {})[entry.position] = entry
        self._cursors: dict[str, _Cursor] = {}

    def replaying(self, scope: str) -> bool:
        """True while recorded entries lie ahead in `scope`: body effects are not repeated then."""
        cursor = self._cursors.get(scope)
        position = cursor.next_position if cursor else 0
        recorded = self._recorded.get(scope)
        if not recorded:
            return False
        return max(recorded) >= position

    def peek(self, scope: str) -> EntryRecord | None:
        """The recorded entry at the scope's next position, without taking it."""
        cursor = self._cursors.get(scope)
        return self._recorded.get(scope, {}).get(cursor.next_position if cursor else 0)

    def enter(self, scope: str, name: str, kind: str, *, now: dt.datetime, input: Any = None) -> Decision:
        """The next entry of `scope`, checked against the record before anything runs, and what
        to do with it."""
        cursor = self._cursors.setdefault(scope, _Cursor())
        if name in cursor.names:
            raise DuplicateEntryName(name, scope)
        position = cursor.next_position
        recorded = self._recorded.get(scope, {}).get(position)
        if recorded is not None and (recorded.name != name or recorded.kind != kind):
            raise HistoryDiverged(
                self.run_id,
                scope,
                position,
                expected=f"{kind} {name!r}",
                recorded=f"{recorded.kind} {recorded.name!r}",
            )
        cursor.names.add(name)
        cursor.next_position = position + 1
        return decide(scope, position, recorded, input, now)

    def entries_of_kind(self, kind: str) -> list[EntryRecord]:
        """Every recorded entry of `kind`, whatever its scope (e.g. the children to cancel)."""
        return [e for entries in self._recorded.values() for e in entries.values() if e.kind == kind]

    def skip(self, scope: str) -> EntryRecord:
        """Take the next recorded entry without running anything (a retired entry, `removed`)."""
        cursor = self._cursors.setdefault(scope, _Cursor())
        entry = self._recorded[scope][cursor.next_position]
        cursor.names.add(entry.name)
        cursor.next_position += 1
        return entry

    def record(self, entry: EntryRecord) -> None:
        """Remember an entry written during this execution (a re-run of its scope sees it)."""
        self._recorded.setdefault(entry.scope, {})[entry.position] = entry

    def restart(self, scope: str) -> None:
        """Walk `scope` (and the scopes under it) again from the top: a branch resumed in-process."""
        for name in [s for s in self._cursors if s == scope or s.startswith(scope + "/")]:
            del self._cursors[name]

    def forget(self, scope: str) -> None:
        """Drop a pruned scope (an old loop iteration) and everything under it."""
        self.restart(scope)
        for name in [s for s in self._recorded if s == scope or s.startswith(scope + "/")]:
            del self._recorded[name]

    def check_finished(self, scope: str) -> None:
        """At the end of a scope's code: entries recorded past its last one mean the code changed."""
        cursor = self._cursors.get(scope, _Cursor())
        leftover = sorted(p for p in self._recorded.get(scope, {}) if p >= cursor.next_position)
        if leftover:
            entry = self._recorded[scope][leftover[0]]
            raise HistoryDiverged(
                self.run_id,
                scope,
                entry.position,
                expected="the end of the scope's code" if scope else "the end of the workflow",
                recorded=f"{entry.kind} {entry.name!r}",
            )
