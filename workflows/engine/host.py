"""What the host application gave the engine for its I/O: the store it keeps runs in and how sync
step bodies run in their worker threads. Set once at start by `defaults.configure` (the Django app
does it in `WorkflowsConfig.ready`); a client built without a store takes this one.

Apart from `defaults` (which also names the registry) so that the client, which the registry
builds, can reach the store without importing the registry back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .steps import SyncStepRunner, run_sync_step

if TYPE_CHECKING:
    from ..storage.base import Store

_store: Callable[[], Store] | None = None
_sync_step_runner: SyncStepRunner = run_sync_step


def use(*, store: Callable[[], Store], sync_step_runner: SyncStepRunner = run_sync_step) -> None:
    """Name the host's store (a factory, called when first needed) and sync step runner."""
    global _store, _sync_step_runner
    _store, _sync_step_runner = store, sync_step_runner


def store() -> Store:
    if _store is None:
        raise RuntimeError(
            "no default store is configured: pass store=..., or add 'workflows' to INSTALLED_APPS"
        )
    return _store()


def sync_step_runner() -> SyncStepRunner:
    """How sync step bodies run in their worker threads (the Django app closes stale connections)."""
    return _sync_step_runner
