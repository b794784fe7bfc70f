"""Child runs (`ctx.child`): started once with the parent's record, awaited without holding
anything, their outcome replayed; a cancelled parent cancels its live children."""

from __future__ import annotations

import pytest

from workflows import CriticalError, queue, setup, workflow
from workflows.core.exceptions import ChildFailed
from workflows.core.records import Audit


def _registry(parent_body, child_body, **child_options):
    return setup(
        use={
            "parent": workflow(parent_body),
            "child": workflow(child_body, state=lambda: {"seen": None}, **child_options),
        }
    )


async def test_child__result_returns_to_the_parent_and_links_both_ways(h):
    async def child_body(ctx):
        return await ctx.step("double", lambda s: ctx.state["input"]["n"] * 2)

    async def parent_body(ctx):
        value = await ctx.child("kid", "child", ["k", "1"], input={"n": 21})
        return await ctx.step("after", lambda s: value + 1)

    reg = _registry(parent_body, child_body)
    parent = await h.client(reg, "parent").aget_or_create(["p"])
    await h.run(reg)
    info = await parent.ainfo()
    assert (info.status, info.result) == ("completed", 43)
    child = await h.store.afind_run("child", ["k", "1"])
    assert (child.status, child.result, child.parent_id) == ("completed", 42, info.id)
    assert child.state["input"] == {"n": 21}
    entry = h.entries(info.id)["kid"]
    assert (entry.kind, entry.status) == ("child", "completed")
    assert entry.output == {"run_id": child.id, "status": "completed", "result": 42}


async def test_child__started_once_across_re_executions(h):
    calls = []

    async def child_body(ctx):
        await ctx.sleep("nap", 60)
        return await ctx.step("s", lambda s: calls.append(1) or "done")

    async def parent_body(ctx):
        first = await ctx.child("kid", "child", ["only"])
        await ctx.sleep("later", 30)
        return first

    reg = _registry(parent_body, child_body)
    parent = await h.client(reg, "parent").aget_or_create(["p"])
    await h.run(reg)
    assert (await parent.ainfo()).result == "done"
    assert calls == [1]  # the parent executed three times; the child was started by the first only
    child = await h.store.afind_run("child", ["only"])
    assert h.entries(child.id)["s"].attempts == 1


async def test_child__failure_raises_child_failed_in_the_parent(h):
    async def child_body(ctx):
        async def boom(step):
            raise CriticalError("no such customer")

        await ctx.step("boom", boom)

    seen = {}

    async def parent_body(ctx):
        try:
            await ctx.child("kid", "child", ["bad"])
        except ChildFailed as exc:
            seen["kind"], seen["error"] = exc.kind, exc.error.get("message")
            return "handled"

    reg = _registry(parent_body, child_body)
    parent = await h.client(reg, "parent").aget_or_create(["p"])
    await h.run(reg)
    assert (await parent.ainfo()).result == "handled"
    assert seen["kind"] == "failed"
    assert "no such customer" in seen["error"]


async def test_child__an_uncaught_failure_fails_the_parent_naming_the_child(h):
    async def child_body(ctx):
        async def boom(step):
            raise CriticalError("nope")

        await ctx.step("boom", boom)

    async def parent_body(ctx):
        await ctx.child("kid", "child", ["bad"])

    reg = _registry(parent_body, child_body)
    parent = await h.client(reg, "parent").aget_or_create(["p"])
    await h.run(reg)
    info = await parent.ainfo()
    assert info.status == "failed"
    assert "child 'kid'" in info.error["message"]


async def test_child__cancelling_the_parent_cancels_its_live_child(h):
    async def child_body(ctx):
        await ctx.queue.next("wait", names=["go"])
        return "never"

    async def parent_body(ctx):
        return await ctx.child("kid", "child", ["c"])

    reg = setup(use={"parent": workflow(parent_body), "child": workflow(child_body, queues={"go": queue()})})
    parent = await h.client(reg, "parent").aget_or_create(["p"])
    await h.run(reg)
    child = await h.store.afind_run("child", ["c"])
    assert child.status == "waiting"
    await parent.acancel()
    await h.run(reg)
    assert (await parent.ainfo()).status == "cancelled"
    assert (await h.store.aget_run(child.id)).status == "cancelled"


async def test_child__a_key_held_by_another_run_is_a_clear_failure(h):
    async def child_body(ctx):
        return 1

    async def parent_body(ctx):
        return await ctx.child("kid", "child", ["taken"])

    reg = _registry(parent_body, child_body)
    await h.client(reg, "child").aget_or_create(["taken"])  # not a child of the parent
    parent = await h.client(reg, "parent").aget_or_create(["p"])
    await h.run(reg)
    info = await parent.ainfo()
    assert info.status == "failed"
    assert info.error["name"] == "ChildConflict"
    assert "give the child a key of its own" in info.error["message"]


async def test_child__unknown_workflow_fails_the_parent(h):
    async def parent_body(ctx):
        return await ctx.child("kid", "nope", ["x"])

    reg = setup(use={"parent": workflow(parent_body)})
    parent = await h.client(reg, "parent").aget_or_create(["p"])
    await h.run(reg)
    info = await parent.ainfo()
    assert info.status == "failed"
    assert "nope" in info.error["message"]


@pytest.mark.parametrize("bad_key", [["ok", 3], "not-a-list"])
async def test_child__a_bad_key_fails_the_parent_and_starts_nothing(h, bad_key):
    async def parent_body(ctx):
        return await ctx.child("kid", "child", bad_key)

    async def child_body(ctx):
        return 1

    reg = _registry(parent_body, child_body)
    parent = await h.client(reg, "parent").aget_or_create(["p"])
    await h.run(reg)
    assert (await parent.ainfo()).status == "failed"


async def test_child__a_replayed_parent_takes_its_finished_childs_outcome(h):
    calls = []

    async def child_body(ctx):
        return await ctx.step("s", lambda s: calls.append(1) or "v1")

    async def parent_body(ctx):
        await ctx.step("before", lambda s: 1)
        return await ctx.child("kid", "child", ["c"])

    reg = _registry(parent_body, child_body)
    parent = await h.client(reg, "parent").aget_or_create(["p"])
    await h.run(reg)
    info = await parent.ainfo()
    assert info.result == "v1"
    before = h.entries(info.id)["before"]
    await h.store.areplay(info.id, before.id, audit=Audit(actor="op"), now=h.clock.now())
    await h.run(reg)
    assert (await parent.ainfo()).result == "v1"
    assert calls == [1]  # the finished child is not run again; its outcome is taken
