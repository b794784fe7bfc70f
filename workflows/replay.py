"""The replay decision, and nothing else: for each entry the code asks for, return the recorded
entry at that position, or a fresh position; fail with HistoryDiverged when name or kind differ.

A run's history is a tree of scopes: the root "", and one scope per join/race branch
("/fanout.a"), loop iteration ("/poll#3") and try block. Each scope has its own positions and
its own unique names. No Django, no I/O: the most tested module of the project.
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
        return bool(recorded) and max(recorded) >= position

    def peek(self, scope: str) -> EntryRecord | None:
        """The recorded entry at the scope's next position, without taking it."""
        cursor = self._cursors.get(scope)
        return self._recorded.get(scope, {}).get(cursor.next_position if cursor else 0)

    def enter(self, scope: str, name: str, kind: str) -> Slot:
        """The next entry of `scope`: checked against the record before anything runs."""
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
        return Slot(scope, position, recorded)

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
