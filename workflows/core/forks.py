"""A fork's rules, as pure Python: the key a fork takes when none is chosen, which nested entries
belong to the root entries it copies, and why a fork from an entry does not apply.

A fork is "replay from entry N, into a copy": a new run of the same workflow and version whose
history is the original's current root entries before N (with their nested scopes, results and
attempts); N and what follows run fresh in it. The original is only read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .records import EntryStatus

FORK = "fork"  # the audit action and the `on_repair` action of a fork
FINISHED = (EntryStatus.COMPLETED, EntryStatus.FAILED)  # what a fork can copy
SEPARATORS = ("/", ".", "#")  # what follows a root entry's name in its nested scopes (`child_scope`)


def derived_key(key: list[str], n: int) -> list[str]:
    """The key of the original's `n`-th fork when none is chosen: its last part marked
    `~fork-<n>`. The key keeps its length, so a body that unpacks `ctx.key` still does."""
    return [*key[:-1], f"{key[-1]}~fork-{n}"]


def first_free_key(key: list[str], taken: Callable[[list[str]], bool], start: int = 1) -> list[str]:
    """The first derived key from `start` on that no run of the workflow holds."""
    n = start
    while taken(derived_key(key, n)):
        n += 1
    return derived_key(key, n)


def root_owner(scope: str, root_names: Iterable[str]) -> str | None:
    """The root entry a nested scope belongs to (`/name`, `/name.branch`, `/name#3`, and anything
    under them): the longest root name it starts with; None for the root scope or none."""
    if not scope:
        return None
    best: str | None = None
    for name in root_names:
        path = f"/{name}"
        if scope == path or (scope.startswith(path) and scope[len(path)] in SEPARATORS):
            if best is None or len(name) > len(best):
                best = name
    return best


def nested_refusal(name: str, scope: str, root: str | None) -> str:
    """Why a fork from an entry inside a join, race, loop or try scope does not apply."""
    ancestor = f" Fork from “{root}”, the root entry it belongs to." if root else ""
    return (
        f"Fork does not apply to “{name}”: it is inside the scope {scope}, and a fork starts "
        f"fresh from an entry of the run's root scope.{ancestor}"
    )


def superseded_refusal(name: str) -> str:
    return (
        f"Fork does not apply to “{name}”: this record was superseded by a replay and is kept as "
        "history only. Fork from the current record of the step instead."
    )


def unfinished_refusal(name: str, status: str, fork_from: str) -> str:
    """Why a fork does not apply when an entry it would copy has not finished."""
    return (
        f"Fork from “{fork_from}” does not apply now: “{name}”, an entry before it, is {status}, "
        "and a fork copies only finished entries (a child run or a wait still in progress belongs "
        "to the original). Fork from that entry instead, or wait until it finishes."
    )
