"""Replayer.compensations: what a cancel of a run would compensate, from a dry replay of its
history (no step body runs, nothing is written), over the real store on the test database."""

from __future__ import annotations

from workflows import queue, setup, workflow
from workflows.engine.replayer import compensations_on_cancel

RAN: list[str] = []


def _booking(changed: bool = False):
    async def body(ctx):
        await ctx.step("quote", lambda s: RAN.append("quote") or 1)  # before the checkpoint
        await ctx.rollback_checkpoint("checkpoint")
        await ctx.step("reserve", lambda s: RAN.append("reserve") or 1, rollback=lambda s, o: None)
        await ctx.step("note", lambda s: RAN.append("note") or 1)
        await ctx.step("charge" if not changed else "bill", lambda s: RAN.append("charge") or 1,
                       rollback=lambda s, o: None)  # fmt: skip
        await ctx.queue.next("wait", names=["go"])
        await ctx.step("ship", lambda s: 1, rollback=lambda s, o: None)

    return setup(use={"wf": workflow(body, queues={"go": queue()}, version="v1")})


async def test_the_rollbacks_of_completed_steps_newest_first_and_nothing_runs(h):
    reg = _booking()
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "waiting"
    RAN.clear()

    found = await compensations_on_cancel(run, h.store.load_history(run.id), reg)

    assert found.known and found.steps == ("charge", "reserve")  # not quote (before), not ship (to come)
    assert RAN == []  # a dry replay runs no step


async def test_a_history_the_code_cannot_replay_is_unknown_not_guessed(h):
    handle = await h.client(_booking(), "wf").aget_or_create(["k"])
    await h.run(_booking())
    run = await handle.ainfo()

    found = await compensations_on_cancel(run, h.store.load_history(run.id), _booking(changed=True))

    assert not found.known and "diverged" in found.detail
    unknown = await compensations_on_cancel(run, h.store.load_history(run.id), setup(use={}))
    assert not unknown.known and "not in the current code" in unknown.detail
