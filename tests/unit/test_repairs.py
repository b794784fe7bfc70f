"""Operators' repairs as store methods, over the real store on the test database: replay (with and without an edited input), retry now,
cancel and an audited send, each written with its audit entry or not at all."""

from __future__ import annotations

import pytest

from workflows import CriticalError, queue, setup, workflow
from workflows.core.exceptions import BadInput, NotApplicable, RunBusy, RunNotFound
from workflows.core.records import Audit, OutgoingMessage
from workflows.testing import arun_until_idle

WHO = Audit(actor="ops:ada", reason="fixed the CRM")


def _fails_until_fixed(fixed: dict):
    async def body(ctx):
        async def call(step):
            if not fixed["ok"]:
                raise CriticalError("CRM says no")
            return {"input": step.input}

        return await ctx.step("call", call, input={"company": "Acme"})

    return setup(use={"wf": workflow(body)})


async def test_replay__a_failed_step_runs_again_and_its_old_record_is_kept(h):
    fixed = {"ok": False}
    reg = _fails_until_fixed(fixed)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).status == "failed"
    old = h.entries(handle.run_id)["call"]

    fixed["ok"] = True
    run = h.store.replay(handle.run_id, old.id, audit=WHO, now=h.clock.now())
    assert run.status == "pending" and run.error is None
    await h.run(reg)

    done = await handle.ainfo()
    assert (done.status, done.result) == ("completed", {"input": {"company": "Acme"}})
    new = h.entries(handle.run_id)["call"]
    assert new.id != old.id and new.status == "completed"
    assert [e.id for e in h.store.superseded(handle.run_id)] == [old.id]
    [entry] = h.store.audit_log(handle.run_id)
    assert (entry.action, entry.actor, entry.reason) == ("replay", "ops:ada", "fixed the CRM")
    assert entry.details["superseded"] == [old.id] and entry.details["from_step"] == "call"


async def test_replay__with_an_edited_input_reruns_the_step_on_it(h):
    fixed = {"ok": True}
    reg = _fails_until_fixed(fixed)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    old = h.entries(handle.run_id)["call"]

    h.store.replay(handle.run_id, old.id, audit=WHO, now=h.clock.now(), input={"company": "Globex"})
    await h.run(reg)

    assert (await handle.ainfo()).result == {"input": {"company": "Globex"}}
    assert h.store.audit_log(handle.run_id)[0].details["input"] == {"company": "Globex"}


async def test_replay__refused_for_a_held_run_or_a_stale_entry_and_nothing_is_written(h):
    fixed = {"ok": True}
    reg = _fails_until_fixed(fixed)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    old = h.entries(handle.run_id)["call"]
    h.store.replay(handle.run_id, old.id, audit=WHO, now=h.clock.now())

    with pytest.raises(BadInput, match="no current entry"):  # superseded by the first replay
        h.store.replay(handle.run_id, old.id, audit=WHO, now=h.clock.now())
    h.store.claim(owner="r1", workflows=["wf"], limit=1, lease_seconds=30, now=h.clock.now())
    with pytest.raises(RunBusy, match="Replay does not apply to a running run") as busy:
        h.store.replay(handle.run_id, old.id, audit=WHO, now=h.clock.now())
    assert isinstance(busy.value, NotApplicable)
    with pytest.raises(RunNotFound):
        h.store.replay("00000000-0000-0000-0000-000000000000", old.id, audit=WHO, now=h.clock.now())
    assert [a.action for a in h.store.audit_log(handle.run_id)] == ["replay"]


async def test_replay__only_a_step_input_can_be_edited(h):
    async def body(ctx):
        await ctx.sleep("nap", 3600)

    reg = setup(use={"wf": workflow(body)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await arun_until_idle(reg, store=h.store, clock=h.clock, advance=False)
    nap = h.entries(handle.run_id)["nap"]
    with pytest.raises(BadInput, match="only a step's input"):
        h.store.replay(handle.run_id, nap.id, audit=WHO, now=h.clock.now(), input={"x": 1})
    assert h.store.audit_log(handle.run_id) == [] and h.store.superseded(handle.run_id) == []


async def test_retry_now__skips_the_backoff_of_a_retrying_step(h):
    calls = []

    async def body(ctx):
        def flaky(step):
            calls.append(step.attempt)
            if step.attempt == 1:
                raise RuntimeError("503")
            return "ok"

        return await ctx.step("s", flaky, retry_backoff_base=1800.0, retry_backoff_max=3600.0)

    reg = setup(use={"wf": workflow(body)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await arun_until_idle(reg, store=h.store, clock=h.clock, advance=False)
    entry = h.entries(handle.run_id)["s"]
    assert entry.status == "retrying" and (await handle.ainfo()).status == "waiting"

    h.store.retry_now(handle.run_id, entry.id, audit=WHO, now=h.clock.now())
    await arun_until_idle(reg, store=h.store, clock=h.clock, advance=False)  # the clock never moved

    assert calls == [1, 2] and (await handle.ainfo()).result == "ok"
    assert h.store.audit_log(handle.run_id)[0].details == {"entry": entry.id, "step": "s"}
    with pytest.raises(NotApplicable, match="Retry now does not apply to a completed run"):
        h.store.retry_now(handle.run_id, entry.id, audit=WHO, now=h.clock.now())
    assert len(h.store.audit_log(handle.run_id)) == 1


async def test_retry_now__refused_for_a_step_not_waiting_to_retry_and_nothing_is_written(h):
    async def body(ctx):
        await ctx.step("first", lambda step: 1)
        await ctx.queue.next("wait", names=["go"])

    reg = setup(use={"wf": workflow(body, queues={"go": queue()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    first = h.entries(handle.run_id)["first"]
    with pytest.raises(NotApplicable, match="step “first”: it is completed, not waiting to retry"):
        h.store.retry_now(handle.run_id, first.id, audit=WHO, now=h.clock.now())
    with pytest.raises(BadInput, match="no current entry"):
        h.store.retry_now(handle.run_id, 10**9, audit=WHO, now=h.clock.now())
    assert h.store.audit_log(handle.run_id) == []


async def test_cancel__ends_a_waiting_run_and_refuses_a_finished_one(h):
    async def body(ctx):
        await ctx.queue.next("wait", names=["go"])

    reg = setup(use={"wf": workflow(body, queues={"go": queue()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    h.store.cancel(handle.run_id, audit=WHO, now=h.clock.now())
    await h.run(reg)
    assert (await handle.ainfo()).status == "cancelled"

    with pytest.raises(NotApplicable, match="already cancelled") as refused:
        h.store.cancel(handle.run_id, audit=WHO, now=h.clock.now())
    assert (refused.value.action, refused.value.status) == ("cancel", "cancelled")
    assert [a.action for a in h.store.audit_log(handle.run_id)] == ["cancel"]


async def test_send__an_operators_message_is_stored_with_its_audit_entry(h):
    async def body(ctx):
        msg = await ctx.queue.next("wait", names=["approval"])
        return msg.body

    reg = setup(use={"wf": workflow(body, queues={"approval": queue()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    message = h.store.send(
        OutgoingMessage(queue="approval", body={"decision": "approve"}, run_id=handle.run_id),
        now=h.clock.now(),
        audit=WHO,
    )
    await h.run(reg)
    assert (await handle.ainfo()).result == {"decision": "approve"}
    [entry] = h.store.audit_log(handle.run_id)
    assert (entry.action, entry.details) == ("send", {"queue": "approval", "message": message.id})
