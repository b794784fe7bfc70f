"""Live updates: after each commit the runner pokes the channel layer, and consumers read the
database. A poke carries no data, only "look again", so a poke that is lost, doubled or early
costs nothing: the events themselves always come from the database, in id order.

Groups: `run.<id>` (the run's followers) and `runs` (the dashboard's list, poked when a commit
changes a run's status). With `REDIS_URL` a poke crosses processes; with the in-memory layer it
reaches only consumers in the same process, so consumers also re-read on a short interval.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from workflows import conf
from workflows.masking import mask

logger = logging.getLogger("inspector.live")

LIST_GROUP = "runs"
POLL_SECONDS_IN_MEMORY = 0.5  # seconds: pokes from other processes never arrive; read this often
POLL_SECONDS_SHARED = 2.0  # seconds: pokes do arrive; the poll only covers writes that poke no one


def run_group(run_id: str) -> str:
    return f"run.{run_id}"


def poll_seconds() -> float:
    """How often a consumer re-reads the database (WORKFLOWS["POLL_SECONDS"] overrides)."""
    configured = conf.get("POLL_SECONDS")
    if configured is not None:
        return float(configured)
    backend = getattr(settings, "CHANNEL_LAYERS", {}).get("default", {}).get("BACKEND", "")
    return POLL_SECONDS_IN_MEMORY if backend.endswith("InMemoryChannelLayer") else POLL_SECONDS_SHARED


async def apoke(run_id: str, *, status_changed: bool) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    await layer.group_send(run_group(run_id), {"type": "run.poke"})
    if status_changed:
        await layer.group_send(LIST_GROUP, {"type": "runs.poke", "run_id": str(run_id)})


def poke(run_id: str, *, status_changed: bool = True) -> None:
    """Sync twin for views (an operator's action): call it after the change has committed."""
    try:
        async_to_sync(apoke)(run_id, status_changed=status_changed)
    except Exception:  # a live update is a courtesy; never fail the action over it
        logger.exception("poke for run %s failed", run_id)


async def on_commit(run_id: str, commit: Any) -> None:
    """The runner's commit hook (WORKFLOWS["COMMIT_HOOKS"]): runs after the commit. Ephemeral
    stream chunks (never stored) travel in the message itself, to the followers connected now."""
    ephemeral = [c for c in commit.stream_chunks if c.ephemeral]
    if ephemeral:
        layer = get_channel_layer()
        if layer is not None:
            frames = [ephemeral_frame(c) for c in ephemeral]
            await layer.group_send(run_group(run_id), {"type": "run.stream", "frames": frames})
        if len(ephemeral) == len(commit.stream_chunks) and not commit.entries and commit.transition is None:
            return  # nothing was stored: nothing to look again for
    await apoke(run_id, status_changed=commit.transition is not None)


def ephemeral_frame(chunk: Any) -> dict[str, Any]:
    """An ephemeral chunk as the WebSocket sends it: no id (it is not stored, so no cursor)."""
    o = chunk.origin
    return {
        "stream": chunk.stream, "step": o.step, "attempt": o.attempt, "seq": chunk.seq,
        "data": mask(chunk.data), "ephemeral": True,
    }  # fmt: skip
