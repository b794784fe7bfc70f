"""Workflows the browser tests run in real `runworkflows` and daphne processes (selected with
WORKFLOWS_REGISTRIES=tests.browser.flows.registry). Nothing here depends on timing: a run waits on
a message the test sends, and a step fails while a flag file exists (the bug) and succeeds once
the test removes it (the fix)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from workflows import CriticalError, event, queue, setup, workflow
from workflows.engine.definition import OPERATOR


def _flag(name: str) -> Path:
    return Path(os.environ.get("BROWSER_FLAG_DIR", "/nonexistent")) / name


async def approval_run(ctx):
    async def draft(step):
        step.state.update(stage="drafted", title=f"Post {ctx.key[0]}")
        step.broadcast("progress", {"stage": "drafted"})
        return {"title": f"Post {ctx.key[0]}", "words": 412}

    post = await ctx.step("draft", draft, input={"job": ctx.key[0]})
    approval = await ctx.queue.next("wait-approval", names=["approve"])

    async def publish(step):
        step.state["stage"] = "published"
        step.broadcast("progress", {"stage": "published"})
        return {"url": f"https://cms.example/{ctx.key[0]}", "approved_by": (approval.body or {}).get("by")}

    return await ctx.step("publish", publish, input=post)


async def payment_run(ctx):
    async def reserve(step):
        return {"reservation": "r-17"}

    await ctx.step("reserve", reserve, input={"amount": 4200, "currency": "EUR"})

    async def charge(step):
        if _flag("charge-broken").exists():
            raise CriticalError("card processor rejected the request: merchant account suspended")
        step.broadcast("progress", {"stage": "charged"})
        return {"charged": 4200}

    return await ctx.step(
        "charge", charge, input={"amount": 4200, "card_token": "tok_visa_4242", "api_key": "sk_live_51Hx"}
    )


async def showcase_run(ctx):
    """The screenshot's run: a retried model call with token usage, a wait, two publishes."""

    async def fetch(step):
        await asyncio.sleep(0.15)  # a picture with visible bars; no test waits on time
        step.broadcast("progress", {"stage": "fetching"})
        return {"chars": 18231, "language": "en"}

    transcript = await ctx.step("fetch-transcript", fetch, input={"job": ctx.key[0]})

    async def extract(step):
        step.broadcast("progress", {"stage": "extracting", "attempt": step.attempt})
        await asyncio.sleep(0.3)
        if step.attempt == 1:
            raise RuntimeError("model returned invalid JSON (Authorization: Bearer sk-test-0123456789abcdef)")
        step.meta["usage"] = {"prompt_tokens": 4120, "completion_tokens": 612, "total_tokens": 4732}
        step.state["stage"] = "extracted"
        return {"summary": "Quarterly planning call: hiring, budget, Q3 launch.", "topics": ["hiring", "budget", "launch"],
                "action_items": [{"owner": "ana", "task": "draft the launch brief"}, {"owner": "li", "task": "open two roles"}]}  # fmt: skip

    extracted = await ctx.step("extract", extract, input=transcript, retry_backoff_base=0.25, max_retries=3)
    approval = await ctx.queue.next("wait-approval", names=["approve"])

    async def crm(step):
        await asyncio.sleep(0.12)
        step.broadcast("progress", {"stage": "crm"})
        return {"contact_id": "c-8841", "note_id": "n-2201"}

    async def cms(step):
        await asyncio.sleep(0.2)
        step.state["stage"] = "published"
        step.broadcast("progress", {"stage": "published"})
        return {
            "url": f"https://cms.example/posts/{ctx.key[0]}",
            "approved_by": (approval.body or {}).get("by"),
        }

    await ctx.step("publish-crm", crm, input={"summary": extracted["summary"], "crm_token": "crm_9f8e7d"})
    return await ctx.step("publish-cms", cms, input={"title": "Planning call", "topics": extracted["topics"]})


async def booking_run(ctx):
    """Reserve and charge with compensations, then wait for a confirmation: cancelling it runs
    the rollbacks (the cancel page says so first)."""
    await ctx.rollback_checkpoint("checkpoint")
    await ctx.step(
        "reserve-seat", lambda s: {"seat": "12A"}, rollback=lambda s, out: {"released": out["seat"]}
    )
    await ctx.step(
        "charge-card", lambda s: {"charge": "ch_1"}, rollback=lambda s, out: {"refunded": out["charge"]}
    )
    await ctx.queue.next("wait-confirm", names=["confirm"])


async def writer_run(ctx):
    """A step that streams: its first attempt writes "Par", "tial " and fails while the flag
    `write-fails` exists (it removes it); the retry writes "Hello ", holds while `write-hold`
    exists, then writes "world"."""

    async def write(step):
        failing = _flag("write-fails")
        if failing.exists():
            for piece in ("Par", "tial "):
                await step.stream.write(piece)
            failing.unlink()
            raise RuntimeError("the model hung up mid-stream")
        await step.stream.write("Hello ")
        for _ in range(1200):  # at most a minute: the test removes the flag long before
            if not _flag("write-hold").exists():
                break
            await asyncio.sleep(0.05)
        await step.stream.write("world")
        return "Hello world"

    return await ctx.step("write", write, retry_backoff_base=0.01, timeout=90)


registry = setup(
    use={
        "booking": workflow(booking_run, queues={"confirm": queue()}, version="2026.1"),
        "writer": workflow(writer_run, version="2026.1"),
        "approval": workflow(
            approval_run, state=lambda: {"stage": "queued", "title": None},
            queues={"approve": queue(choices={"Approve": {"by": OPERATOR}})},
            events={"progress": event()}, version="2026.1", labels=("title", "stage"),
        ),
        "payment": workflow(
            payment_run, events={"progress": event()}, version="2026.1",
            calls_out={"reserve": "reserve the amount with the processor", "charge": "charge the card"},
        ),
        "aiJob": workflow(
            showcase_run, state=lambda: {"stage": "queued"}, queues={"approve": queue()},
            events={"progress": event()}, version="2026.2",
        ),
    }
)  # fmt: skip
