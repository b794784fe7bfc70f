"""The waiting send holds no thread: other requests are served while it waits (ASGI client)."""

from __future__ import annotations

import asyncio

import pytest

from workflows.models import Message
from workflows.testing import arun_until_idle

APPROVE = {"approved": True, "by": "ann"}


@pytest.mark.django_db(transaction=True)
async def test_send__waiting_request_leaves_the_server_free(async_client, registry, api_key):
    headers = {"Authorization": f"Bearer {api_key}"}

    async def post(path, body):
        return await async_client.post(path, body, content_type="application/json", headers=headers)

    run_id = (await post("/api/workflows/approval/runs", {"key": ["a"]})).json()["id"]

    async def meanwhile():
        async with asyncio.timeout(20):
            while not await Message.objects.filter(run_id=run_id).aexists():  # noqa: ASYNC110 - a row, not an event
                await asyncio.sleep(0.01)
        # Served while the other request waits; a blocked database thread would stall it.
        read = await async_client.get(f"/api/runs/{run_id}", headers=headers)
        await arun_until_idle(registry)
        return read

    waited, read = await asyncio.gather(
        post(
            f"/api/runs/{run_id}/messages", {"queue": "approve", "body": APPROVE, "wait": True, "timeout": 20}
        ),
        meanwhile(),
    )

    assert read.status_code == 200 and read.json()["status"] == "pending"
    assert waited.status_code == 200, waited.content
    assert waited.json()["response"] == {"ok": True, "approved": True}
