"""What the engine uses when a caller names no store or registry: whatever the host application
configured. The Django app (`WorkflowsConfig.ready`) configures its store and the registries of
its settings; code that runs the engine without Django passes its store explicitly.

The engine never imports the application that configures it: the dependency points inward. The
store and the sync step runner are kept in `host` (the client reaches them there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from . import host
from .steps import SyncStepRunner, run_sync_step

if TYPE_CHECKING:
    from ..storage.base import Store
    from .registry import Registry

_registry: Callable[[], Registry] | None = None


def configure(
    *,
    store: Callable[[], Store],
    registry: Callable[[], Registry],
    sync_step_runner: SyncStepRunner = run_sync_step,
) -> None:
    """Name the default store and registry (factories, called when first needed)."""
    global _registry
    host.use(store=store, sync_step_runner=sync_step_runner)
    _registry = registry


def default_store() -> Store:
    return host.store()


def default_registry() -> Registry:
    if _registry is None:
        raise RuntimeError("no default registry is configured: pass the registry explicitly")
    return _registry()


def sync_step_runner() -> SyncStepRunner:
    """How sync step bodies run in their worker threads (the Django app closes stale connections)."""
    return host.sync_step_runner()
