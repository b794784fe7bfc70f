"""Live updates: after each commit the runner pokes the run's channel group (placeholder; the
inspector issue fills this in)."""

from __future__ import annotations

from typing import Any


async def on_commit(run_id: str, commit: Any) -> None:
    return None
