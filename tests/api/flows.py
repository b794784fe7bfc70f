"""Workflows the API tests drive; settings point WORKFLOWS["REGISTRIES"] at `registry`."""

from __future__ import annotations

from pydantic import BaseModel

from workflows import CriticalError, event, queue, setup, workflow

# Failures still to come per step name; a test sets them before running the flaky workflow.
FAILURES: dict[str, int] = {}


class Approval(BaseModel):
    approved: bool
    by: str


async def approval_run(ctx):
    message = await ctx.queue.next("wait-approval", names=["approve"], completable=True)

    def record(step):
        step.state["approved"] = step.input["approved"]
        step.broadcast("progress", {"stage": "approved" if step.input["approved"] else "rejected"})
        return step.input

    decision = await ctx.step("record", record, input=message.body)
    await message.complete({"ok": True, "approved": decision["approved"]})
    return decision


def broken(c):
    """An action with a bug: the API answers 500 in the one error shape, never the bug's text."""
    raise RuntimeError("the action's bug: secret internals here")


async def summary(c):
    return {"status": c.status, "approved": c.state.get("approved")}


approval = workflow(
    run=approval_run,
    state=lambda: {"approved": None},
    queues={"approve": queue(Approval), "note": queue()},
    events={"progress": event()},
    actions={"state": lambda c: c.state, "summary": summary, "broken": broken},
    version="v1",
)


async def flaky_run(ctx):
    def fetch(step):
        if FAILURES.get("fetch", 0) > 0:
            FAILURES["fetch"] -= 1
            raise RuntimeError("upstream said 503")
        return {"n": 1}

    def check(step):
        if FAILURES.get("check", 0) > 0:
            FAILURES["check"] -= 1
            raise CriticalError("bad data")
        return "checked"

    fetched = await ctx.step("fetch", fetch, max_retries=1, retry_backoff_base=30, retry_backoff_max=60)
    checked = await ctx.step("check", check, input=fetched)
    return {"fetched": fetched, "checked": checked}


flaky = workflow(run=flaky_run, queues={"note": queue()}, version="v1")


async def writer_run(ctx):
    async def write(step):
        words = ["Hel", "lo"] if FAILURES.get("write", 0) > 0 else ["Hello", ", ", "world"]
        for word in words:
            await step.stream.write(word)
        if FAILURES.get("write", 0) > 0:
            FAILURES["write"] -= 1
            raise RuntimeError("the model hung up mid-stream")
        return "".join(words)

    return await ctx.step("write", write, retry_backoff_base=0.001)


writer = workflow(run=writer_run, version="v1")

registry = setup(use={"approval": approval, "flaky": flaky, "writer": writer})
