"""The replay decision, and nothing else: for each entry the code asks for, return the recorded
entry at that position, or a fresh position; fail with HistoryDiverged when name or kind differ.

No Django, no I/O: the most tested module of the project.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .exceptions import DuplicateEntryName, HistoryDiverged
from .records import EntryRecord


@dataclass(frozen=True)
class Slot:
    scope: str
    position: int
    recorded: EntryRecord | None


@dataclass
class _Cursor:
    next_position: int = 0
    names: set[str] = field(default_factory=set)


class History:
    """A run's recorded entries, by scope and position, walked once per execution."""

    def __init__(self, run_id: str, entries: list[EntryRecord]) -> None:
        self.run_id = run_id
        self._recorded: dict[str, dict[int, EntryRecord]] = {}
        for entry in entries:
            self._recorded.setdefault(entry.scope, {})[entry.position] = entry
        self._cursors: dict[str, _Cursor] = {}
        self._unvisited = len(entries)

    @property
    def replaying(self) -> bool:
        """True while recorded entries lie ahead: effects outside steps are not repeated then."""
        return self._unvisited > 0

    def enter(self, scope: str, name: str, kind: str) -> Slot:
        """The next entry of `scope`: checked against the record before anything runs."""
        cursor = self._cursors.setdefault(scope, _Cursor())
        if name in cursor.names:
            raise DuplicateEntryName(name, scope)
        position = cursor.next_position
        recorded = self._recorded.get(scope, {}).get(position)
        if recorded is not None:
            if recorded.name != name or recorded.kind != kind:
                raise HistoryDiverged(
                    self.run_id,
                    scope,
                    position,
                    expected=f"{kind} {name!r}",
                    recorded=f"{recorded.kind} {recorded.name!r}",
                )
            self._unvisited -= 1
        cursor.names.add(name)
        cursor.next_position = position + 1
        return Slot(scope, position, recorded)

    def record(self, entry: EntryRecord) -> None:
        """Remember an entry written during this execution (a later replay of the scope sees it)."""
        self._recorded.setdefault(entry.scope, {})[entry.position] = entry

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
                expected="the end of the workflow",
                recorded=f"{entry.kind} {entry.name!r}",
            )
