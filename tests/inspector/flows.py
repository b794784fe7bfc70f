"""Workflows the inspector tests drive in-process. FAIL names the steps that fail for now (the
"bug"); a test removes a name to "fix" it. `approval` and `flaky` declare nothing for the
inspector; `expense` declares labels and a decision queue."""

from __future__ import annotations

from workflows import CriticalError, Limiter, event, queue, setup, workflow
from workflows.engine.definition import OPERATOR

FAIL: set[str] = set()


async def approval_run(ctx):
    async def prepare(step):
        step.state["stage"] = "prepared"
        step.broadcast("progress", {"stage": "prepared"})
        step.meta["usage"] = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
        return {"draft": "hello", "api_key": "sk-live-abcdefghijklmnopqrstuv"}

    draft = await ctx.step("prepare", prepare, input={"title": "t", "password": "hunter2"})
    msg = await ctx.queue.next("wait-approval", names=["approve"])

    async def publish(step):
        if "publish" in FAIL:
            raise CriticalError("the CMS rejected the post")
        step.broadcast("progress", {"stage": "published"})
        return {"published": True, "by": msg.body}

    return await ctx.step("publish", publish, input=draft)


async def flaky_run(ctx):
    async def call(step):
        if "call" in FAIL:
            raise RuntimeError("upstream 503 (token=abc123secret)")
        return {"ok": True}

    return await ctx.step("call", call, max_retries=3, retry_backoff_base=30.0, retry_backoff_max=60.0)


async def expense_run(ctx):
    claim = (await ctx.queue.next("wait-claim", names=["claim"])).body

    async def file(step):
        step.state.update(claimant=claim["claimant"], amount=claim["amount"], phase="in review")
        step.state["card_token"] = claim.get("card_token")

    await ctx.step("file", file)
    verdict = await ctx.queue.next("wait-verdict", names=["verdict"])

    async def settle(step):
        step.state["phase"] = "paid" if verdict.body["pay"] else "refused"
        return verdict.body

    return await ctx.step("settle", settle)


EXPENSE_CHOICES = {
    "Pay": {"pay": True, "approver": OPERATOR},
    "Refuse": {"pay": False, "approver": OPERATOR, "reason": ""},
}


async def stubborn_run(ctx):
    """Its step pauses the run when out of retries (on_exhausted="pause"), for an operator."""

    async def call(step):
        if "stubborn" in FAIL:
            raise RuntimeError("vendor down (token=abc123secret)")
        return {"ok": True}

    return await ctx.step("call", call, max_retries=1, retry_backoff_base=0.0)


async def family_run(ctx):
    return await ctx.child("kid", "flaky", [ctx.key[0] + "-kid"])


async def metered_run(ctx):
    return await ctx.step("lookup", lambda s: "found", limit="crm")


UNDONE: list[str] = []  # the rollbacks of `booking` that ran, in order


async def booking_run(ctx):
    """Reserve, charge, note; then wait for a confirmation. Cancelling it compensates."""
    await ctx.rollback_checkpoint("checkpoint")
    await ctx.step(
        "reserve-seat", lambda s: {"seat": "12A"}, rollback=lambda s, out: UNDONE.append("reserve-seat")
    )
    await ctx.step(
        "charge-card", lambda s: {"charge": "ch_1"}, rollback=lambda s, out: UNDONE.append("charge-card")
    )
    await ctx.step("note", lambda s: "noted")  # nothing to undo
    await ctx.queue.next("wait-confirm", names=["confirm"])


registry = setup(
    use={
        "booking": workflow(booking_run, queues={"confirm": queue()}, version="v1"),
        "family": workflow(family_run, version="v1"),
        "metered": workflow(metered_run, version="v1"),
        "approval": workflow(
            approval_run,
            state=lambda: {"stage": "queued"},
            queues={"approve": queue()},
            events={"progress": event()},
            version="v1",
        ),
        "flaky": workflow(flaky_run, version="v1"),
        "stubborn": workflow(stubborn_run, version="v1", on_exhausted="pause"),
        "expense": workflow(
            expense_run,
            state=lambda: {"claimant": None, "amount": None, "phase": "new", "card_token": None},
            queues={"claim": queue(), "verdict": queue(choices=EXPENSE_CHOICES), "note": queue()},
            labels=("claimant", "phase", "amount", "card_token"),
            version="v1",
        ),
    },
    limiters=[Limiter("crm", requests_per_minute=1)],
)
