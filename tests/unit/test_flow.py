"""join, race, loop, try, compensation and versioning over the real store on the test database."""

from __future__ import annotations

import asyncio

import pytest

from workflows import CriticalError, JoinError, Loop, RaceError, queue, setup, workflow
from workflows.core.clock import Clock
from workflows.engine.runner import Runner


def one(fn, **kw):
    return setup(use={"wf": workflow(fn, **kw)})


async def start(h, reg, key="k"):
    return await h.client(reg, "wf").aget_or_create([key])


async def first_pass(h, reg):
    """One round of execution at the current clock time, without skipping ahead."""
    await Runner(registry=reg, store=h.store, clock=h.clock, watch=False).run_due()


# --- join ----------------------------------------------------------------------------------------


async def test_join__returns_every_branch_result(h):
    async def body(ctx):
        async def a(c):
            return await c.step("s", lambda s: "A")

        async def b(c):
            return await c.step("s", lambda s: "B")  # same name, other scope: fine

        return await ctx.join("both", {"a": a, "b": b})

    reg = one(body)
    handle = await start(h, reg)
    await h.run(reg)
    assert (await handle.ainfo()).result == {"a": "A", "b": "B"}


async def test_join__a_retrying_branch_does_not_hold_up_the_other(h):
    order = []

    async def body(ctx):
        async def flaky(c):
            async def s(step):
                order.append(f"flaky{step.attempt}")
                if step.attempt == 1:
                    raise RuntimeError("once")
                return 1

            return await c.step("s", s, retry_backoff_base=5)

        async def quick(c):
            first = await c.step("one", lambda s: order.append("quick1") or 1)
            return first + await c.step("two", lambda s: order.append("quick2") or 1)

        return await ctx.join("j", {"flaky": flaky, "quick": quick})

    reg = one(body)
    handle = await start(h, reg)
    await h.run(reg)
    assert (await handle.ainfo()).result == {"flaky": 1, "quick": 2}
    assert order.index("quick2") < order.index("flaky2")


async def test_join__settled_branches_never_rerun_across_suspensions(h):
    calls = []

    async def body(ctx):
        async def sleeper(c):
            await c.sleep("nap", 3600)
            return await c.step("after", lambda s: calls.append("after") or "slept")

        async def worker(c):
            return await c.step("work", lambda s: calls.append("work") or "worked")

        return await ctx.join("j", {"sleeper": sleeper, "worker": worker})

    reg = one(body)
    handle = await start(h, reg)
    await first_pass(h, reg)
    assert (await handle.ainfo()).status == "waiting"  # nothing runs: the run holds nothing
    await h.run(reg)
    assert (await handle.ainfo()).result == {"sleeper": "slept", "worker": "worked"}
    assert calls == ["work", "after"]


async def test_join__join_error_carries_each_failed_branch(h):
    async def body(ctx):
        async def bad(c):
            await c.step("s", lambda s: (_ for _ in ()).throw(CriticalError("no")))

        async def worse(c):
            raise ValueError("body bug")

        async def good(c):
            return await c.step("s", lambda s: 1)

        try:
            await ctx.join("j", {"bad": bad, "worse": worse, "good": good})
        except JoinError as exc:
            return sorted((b, e["name"]) for b, e in exc.errors.items())

    reg = one(body)
    handle = await start(h, reg)
    await h.run(reg)
    assert (await handle.ainfo()).result == [["bad", "StepFailed"], ["worse", "ValueError"]]
    assert "good" not in str((await handle.ainfo()).result)


async def test_join__waits_on_queues_of_its_branches(h):
    async def body(ctx):
        async def approval(c):
            msg = await c.queue.next("w", names=["approve"])
            return msg.body

        async def other(c):
            return await c.step("s", lambda s: 2)

        return await ctx.join("j", {"approval": approval, "other": other})

    reg = one(body, queues={"approve": queue()})
    handle = await start(h, reg)
    await h.run(reg)
    assert (await handle.ainfo()).status == "waiting"
    await handle.asend("approve", "yes")
    await h.run(reg)
    assert (await handle.ainfo()).result == {"approval": "yes", "other": 2}


# --- race ----------------------------------------------------------------------------------------


async def test_race__a_sleep_branch_times_out_a_slow_step_and_cancels_it(h):
    cancelled = asyncio.Event()
    h.clock = Clock()  # real time: the sleep branch must fire while the slow step runs

    async def never(step):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def body(ctx):
        async def slow(c):
            return await c.step("call", never, timeout=0)

        async def deadline(c):
            await c.sleep("limit", 0.2)
            return "timed out"

        result = await ctx.race("r", {"slow": slow, "deadline": deadline})
        return [result.winner, result.value]

    reg = one(body)
    handle = await start(h, reg)
    await asyncio.wait_for(Runner(registry=reg, store=h.store, clock=h.clock, watch=False).run_due(), 10)
    assert (await handle.ainfo()).result == ["deadline", "timed out"]
    assert cancelled.is_set()


async def test_race__queue_wait_with_timeout_branch(h):
    async def body(ctx):
        async def reply(c):
            return (await c.queue.next("w", names=["reply"])).body

        async def timeout(c):
            await c.sleep("limit", 60)
            return None

        result = await ctx.race("r", {"reply": reply, "timeout": timeout})
        return result.winner

    reg = one(body, queues={"reply": queue()})
    answered, silent = await start(h, reg, "answered"), await start(h, reg, "silent")
    await first_pass(h, reg)
    await answered.asend("reply", "hi")
    await h.run(reg)
    assert (await answered.ainfo()).result == "reply"
    assert (await silent.ainfo()).result == "timeout"


async def test_race__the_winner_is_recorded_and_replayed_without_running(h):
    calls = []

    async def body(ctx):
        async def fast(c):
            return await c.step("s", lambda s: calls.append("fast") or "F")

        async def never(c):
            await c.queue.next("w", names=["q"])

        result = await ctx.race("r", {"fast": fast, "never": never})
        await ctx.sleep("after", 10)
        return result.value

    reg = one(body, queues={"q": queue()})
    handle = await start(h, reg)
    await h.run(reg)
    assert (await handle.ainfo()).result == "F" and calls == ["fast"]


async def test_race__all_failing_raises_race_error(h):
    async def body(ctx):
        async def bad(c):
            raise ValueError("a")

        async def worse(c):
            raise KeyError("b")

        await ctx.race("r", {"bad": bad, "worse": worse})

    reg = one(body)
    handle = await start(h, reg)
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and run.error["name"] == "RaceError"
    with pytest.raises(RaceError):
        raise RaceError("r", {})


# --- loop ----------------------------------------------------------------------------------------


async def test_loop__iterates_with_state_and_keeps_only_recent_iterations(h):
    async def body(ctx):
        async def count(c, state):
            n = await c.step("inc", lambda s: state["n"] + 1)
            if n == 10:
                return Loop.done(n)
            return Loop.next({"n": n})

        return await ctx.loop("counter", count, state={"n": 0}, history_size=2)

    reg = one(body)
    handle = await start(h, reg)
    await h.run(reg)
    assert (await handle.ainfo()).result == 10
    scopes = sorted({e.scope for e in h.store.load_history(handle.run_id)})
    assert scopes == ["", "/counter#7", "/counter#8", "/counter#9"]


async def test_loop__resume_starts_at_the_current_iteration(h):
    calls = []

    async def body(ctx):
        async def tick(c, state):
            await c.step("work", lambda s: calls.append(state) or state)
            await c.sleep("pause", 60)
            return Loop.done(state) if state == 3 else Loop.next(state + 1)

        return await ctx.loop("ticks", tick, state=0, history_size=None)

    reg = one(body)
    handle = await start(h, reg)
    await h.run(reg)
    assert (await handle.ainfo()).result == 3
    assert calls == [0, 1, 2, 3]


async def test_loop__versions_are_pinned_per_iteration(h):
    async def body(ctx):
        async def it(c, state):
            v = await c.get_version("algo", 2 if state >= 1 else 1)
            state_out = state + 1
            seen = await c.step("record", lambda s: v)
            return Loop.done([*ctx.state.get("v", []), seen]) if state_out == 3 else Loop.next(state_out)

        return await ctx.loop("l", it, state=0)

    reg = one(body)
    handle = await start(h, reg)
    await h.run(reg)
    entries = [e for e in h.store.load_history(handle.run_id) if e.kind == "version"]
    assert sorted(e.output for e in entries) == [1, 2, 2]


# --- try -----------------------------------------------------------------------------------------


async def test_try_step__terminal_failures_come_back_as_data(h):
    async def body(ctx):
        crit = await ctx.try_step("crit", lambda s: (_ for _ in ()).throw(CriticalError("nope")))
        exhausted = await ctx.try_step("flaky", lambda s: 1 / 0, max_retries=1)
        ok = await ctx.try_step("fine", lambda s: 5)
        return [crit.ok, crit.failure.kind, exhausted.failure.kind, ok.ok, ok.value]

    reg = one(body)
    handle = await start(h, reg)
    await h.run(reg)
    assert (await handle.ainfo()).result == [False, "critical", "exhausted", True, 5]
    assert len(h.attempts(handle.run_id, "flaky")) == 2  # retries still happened first


async def test_try_block__a_failing_block_is_data_and_replays_from_record(h):
    calls = []

    async def body(ctx):
        async def block(c):
            await c.step("one", lambda s: calls.append("one"))
            raise RuntimeError("block failed")

        result = await ctx.try_block("attempt", block)
        await ctx.sleep("later", 5)
        return [result.ok, result.failure.kind, result.failure.error["message"]]

    reg = one(body)
    handle = await start(h, reg)
    await h.run(reg)
    assert (await handle.ainfo()).result == [False, "error", "block failed"]
    assert calls == ["one"]


# --- compensation --------------------------------------------------------------------------------


async def test_rollback__completed_steps_undone_in_reverse_once(h):
    undone = []

    async def body(ctx):
        await ctx.rollback_checkpoint("start")
        await ctx.step("reserve", lambda s: "R1", rollback=lambda s, out: undone.append(("reserve", out)))
        await ctx.step("charge", lambda s: "C1", rollback=lambda s, out: undone.append(("charge", out)))
        await ctx.step("ship", lambda s: (_ for _ in ()).throw(CriticalError("no stock")))

    reg = one(body)
    handle = await start(h, reg)
    await h.run(reg)
    run = await handle.ainfo()
    assert undone == [("charge", "C1"), ("reserve", "R1")]
    assert run.status == "failed" and run.error["rollback"] == {"ran": 2, "failed": []}


async def test_rollback__resumes_after_a_wait_without_rerunning_finished_rollbacks(h):
    undone = []

    def flaky_undo(step, out):
        undone.append(("b", step.attempt))
        if step.attempt == 1:
            raise RuntimeError("undo failed once")

    async def body(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("a", lambda s: 1, rollback=lambda s, out: undone.append(("a", s.attempt)))
        await ctx.step("b", lambda s: 2, rollback=flaky_undo)
        raise ValueError("fail after both")

    reg = one(body)
    handle = await start(h, reg)
    await first_pass(h, reg)
    assert (await handle.ainfo()).status == "waiting"  # compensation waits out a retry backoff
    await h.run(reg)
    assert undone == [("b", 1), ("b", 2), ("a", 1)]
    assert (await handle.ainfo()).status == "failed"


async def test_rollback__a_failed_rollback_is_reported_and_the_rest_still_run(h):
    seen, undone = [], []

    def broken(step, out):
        raise CriticalError("cannot refund")

    async def body(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("a", lambda s: 1, rollback=lambda s, out: undone.append("a"))
        await ctx.step("b", lambda s: 2, rollback=broken)
        raise ValueError("boom")

    reg = one(body, on_error=lambda c, ev: seen.append(ev))
    handle = await start(h, reg)
    await h.run(reg)
    run = await handle.ainfo()
    assert undone == ["a"]
    assert [ev.rollback.step_name for ev in seen if ev.rollback] == ["b"]
    assert run.error["rollback"]["failed"][0]["step"] == "b"


async def test_rollback__needs_a_checkpoint(h):
    async def body(ctx):
        await ctx.step("a", lambda s: 1, rollback=lambda s, out: None)

    reg = one(body)
    handle = await start(h, reg)
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and "rollback_checkpoint" in run.error["message"]


async def test_cancel__runs_compensations_then_ends_cancelled(h):
    undone = []

    async def body(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("book", lambda s: "B", rollback=lambda s, out: undone.append(out))
        await ctx.queue.next("w", names=["go"])
        await ctx.step("never", lambda s: undone.append("never"))

    reg = one(body, queues={"go": queue()})
    handle = await start(h, reg)
    await h.run(reg)
    await handle.acancel()
    await h.run(reg)
    assert (await handle.ainfo()).status == "cancelled"
    assert undone == ["B"]


# --- versioning ----------------------------------------------------------------------------------


async def test_get_version__old_runs_keep_their_branch_new_runs_take_latest(h):
    async def v1(ctx):
        await ctx.step("extract", lambda s: 1)
        await ctx.queue.next("w", names=["go"])
        return "v1 path"

    async def v2(ctx):
        await ctx.step("extract", lambda s: 1)
        version = await ctx.get_version("enrich-gate", 1)
        if version == 0:
            await ctx.queue.next("w", names=["go"])
            return "v1 path"
        await ctx.queue.next("w", names=["go"])
        return await ctx.step("enrich", lambda s: "v2 path")

    reg1, reg2 = one(v1, queues={"go": queue()}), one(v2, queues={"go": queue()})
    old = await start(h, reg1, "old")
    await h.run(reg1)
    new = await start(h, reg2, "new")
    await h.run(reg2)
    await old.asend("go")
    await new.asend("go")
    await h.run(reg2)
    assert (await old.ainfo()).result == "v1 path"
    assert (await new.ainfo()).result == "v2 path"


async def test_removed__old_runs_skip_a_retired_entry(h):
    async def v1(ctx):
        await ctx.step("legacy", lambda s: 1)
        await ctx.queue.next("w", names=["go"])
        return "done"

    async def v2(ctx):
        await ctx.removed("legacy", "step")
        await ctx.queue.next("w", names=["go"])
        return "done"

    reg1, reg2 = one(v1, queues={"go": queue()}), one(v2, queues={"go": queue()})
    old = await start(h, reg1, "old")
    await h.run(reg1)
    new = await start(h, reg2, "new")
    await old.asend("go")
    await new.asend("go")
    await h.run(reg2)
    assert (await old.ainfo()).result == "done" and (await new.ainfo()).result == "done"


async def test_versions__old_runs_finish_on_their_registered_version(h):
    async def v1(ctx):
        await ctx.queue.next("w", names=["go"])
        return await ctx.step("old-step", lambda s: "v1")

    async def v2(ctx):
        await ctx.queue.next("w", names=["go"])
        return await ctx.step("new-step", lambda s: "v2")

    old_def = workflow(v1, queues={"go": queue()}, version="1")
    new_def = workflow(v2, queues={"go": queue()}, version="2")
    reg1 = setup(use={"wf": old_def})
    old = await start(h, reg1, "old")
    await h.run(reg1)
    reg2 = setup(use={"wf": [new_def, old_def]})  # deploy: v2 is latest, v1 still registered
    new = await start(h, reg2, "new")
    await old.asend("go")
    await new.asend("go")
    await h.run(reg2)
    assert [(await r.ainfo()).version for r in (old, new)] == ["1", "2"]
    assert (await old.ainfo()).result == "v1" and (await new.ainfo()).result == "v2"


def test_versions__a_version_registered_twice_is_refused():
    async def body(ctx):
        return None

    with pytest.raises(ValueError, match="more than once"):
        setup(use={"wf": [workflow(body, version="1"), workflow(body, version="1")]})


async def test_join__a_branch_that_diverges_fails_the_run_with_history_diverged(h):
    async def v1(ctx):
        async def a(c):
            return await c.step("old-name", lambda s: 1)

        async def b(c):
            await c.sleep("nap", 10)

        return await ctx.join("j", {"a": a, "b": b})

    async def v2(ctx):
        async def a(c):
            return await c.step("new-name", lambda s: 1)

        async def b(c):
            await c.sleep("nap", 10)

        return await ctx.join("j", {"a": a, "b": b})

    reg1 = one(v1)
    handle = await start(h, reg1)
    await first_pass(h, reg1)
    h.clock.advance(20)
    await h.run(one(v2))
    run = await handle.ainfo()
    assert run.status == "failed" and run.error["name"] == "HistoryDiverged"
    assert "'new-name'" in run.error["message"] and "'old-name'" in run.error["message"]
    assert [e.name for e in h.store.load_history(handle.run_id) if e.kind == "join"] == []
