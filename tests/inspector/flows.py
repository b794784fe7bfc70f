"""Workflows the inspector tests drive in-process. FAIL names the steps that fail for now (the
"bug"); a test removes a name to "fix" it."""

from __future__ import annotations

from workflows import CriticalError, event, queue, setup, workflow

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


registry = setup(
    use={
        "approval": workflow(
            approval_run,
            state=lambda: {"stage": "queued"},
            queues={"approve": queue()},
            events={"progress": event()},
            version="v1",
        ),
        "flaky": workflow(flaky_run, version="v1"),
    }
)
