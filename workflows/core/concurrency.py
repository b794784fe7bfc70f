"""Concurrency groups and priority: `workflow(..., concurrency=Concurrency(max=2, key=lambda run:
run.key[0]))` lets at most `max` runs of one group execute at once, across every runner; a
run's `priority` (-100..100, default 0) orders claims: higher first, FIFO within one.

A run's group is named when it starts (`"<workflow>"`, or `"<workflow>/<key>"` with a key
function) and stored with it; the claim admits a run only while its group has fewer than `max`
runs executing under a live lease, so a waiting run holds nothing and a crashed runner's slot
frees when its lease lapses. The store decides, in the database (the claim's SQL); this module
holds the declaration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .exceptions import BadInput

PRIORITY_MIN, PRIORITY_MAX = -100, 100
DEFAULT_PRIORITY = 0
GROUP_MAX_LENGTH = 300  # characters of a group name (the column's size)


def check_priority(priority: Any) -> int:
    """A run's priority: a whole number from -100 to 100 (higher is claimed first)."""
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not PRIORITY_MIN <= priority <= PRIORITY_MAX
    ):
        raise BadInput(
            f"priority must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX} (higher runs first),"
            f" not {priority!r}"
        )
    return priority


@dataclass(frozen=True)
class StartingRun:
    """What a concurrency key function is given: the run about to start."""

    workflow: str
    key: tuple[str, ...]


@dataclass(frozen=True)
class Concurrency:
    """At most `max` runs of one group execute at once. Without `key` the group is the workflow;
    with it, `key(run)` (e.g. `lambda run: run.key[0]`) names the group within the workflow."""

    max: int
    key: Callable[[StartingRun], Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max, bool) or not isinstance(self.max, int) or self.max < 1:
            raise BadInput(f"Concurrency(max=...) must be a whole number >= 1, not {self.max!r}")
        if self.key is not None and not callable(self.key):
            raise BadInput(
                f"Concurrency(key=...) must be a function of the run (e.g. lambda run: run.key[0]),"
                f" not {self.key!r}"
            )

    def group(self, workflow: str, key: Iterable[str]) -> str:
        """The group a run of `workflow` with `key` belongs to. BadInput when the key function
        fails or names no group: the start is refused and nothing is created."""
        if self.key is None:
            return workflow
        run = StartingRun(workflow=workflow, key=tuple(key))
        try:
            value = self.key(run)
        except Exception as exc:
            raise BadInput(
                f"workflow {workflow!r}: its concurrency key function failed for key {list(run.key)!r}:"
                f" {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
            raise BadInput(
                f"workflow {workflow!r}: its concurrency key function must return a non-empty string"
                f" (or an int), not {value!r}"
            )
        name = f"{workflow}/{value}"
        if len(name) > GROUP_MAX_LENGTH:
            raise BadInput(
                f"workflow {workflow!r}: concurrency group {name[:60]!r}... is over {GROUP_MAX_LENGTH} characters"
            )
        return name


@dataclass(frozen=True)
class GroupUse:
    """A group as the dashboard shows it: runs executing now (live lease), the most its code
    allows, and runs due that wait for a slot."""

    group: str
    workflow: str
    running: int
    max: int
    waiting: int
