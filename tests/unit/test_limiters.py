"""Named limiters shared by steps across runs: requests and tokens per minute, concurrency; a
step that must wait for its limiter waits durably and spends no attempt."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from workflows import Limiter, setup, workflow
from workflows.core.exceptions import BadInput
from workflows.testing import arun_until_idle


def _limited(limiter: Limiter, step_fn, name: str = "call"):
    async def body(ctx):
        return await ctx.step(name, step_fn, limit=limiter.name)

    return setup(use={"wf": workflow(body)}, limiters=[limiter])


def _starts(h, run_ids, name="call"):
    return sorted(a.started_at for rid in run_ids for a in h.attempts(rid, name))


async def test_requests_per_minute__120_steps_at_60_per_minute_take_two_minutes(h):
    reg = _limited(Limiter("api", requests_per_minute=60), lambda s: "ok")
    client = h.client(reg, "wf")
    ids = [(await client.aget_or_create([f"r{i}"])).run_id for i in range(120)]
    begin = h.clock.now()
    await arun_until_idle(reg, store=h.store, clock=h.clock, concurrency=50)
    assert [(await h.store.aget_run(rid)).status for rid in ids] == ["completed"] * len(ids)
    starts = _starts(h, ids)
    assert len(starts) == 120  # one attempt each: waiting for the limiter spent none
    for i in range(len(starts) - 60):
        assert starts[i + 60] - starts[i] >= dt.timedelta(minutes=1), "61 starts inside one minute"
    assert dt.timedelta(minutes=1) <= starts[-1] - begin < dt.timedelta(minutes=2, seconds=5)


async def test_tokens_per_minute__charges_the_usage_steps_record(h):
    def call(step):
        step.meta["usage"] = {"prompt_tokens": 300, "completion_tokens": 100}
        return "ok"

    reg = _limited(Limiter("model", tokens_per_minute=1000), call)
    client = h.client(reg, "wf")
    ids = [(await client.aget_or_create([f"t{i}"])).run_id for i in range(6)]
    await arun_until_idle(reg, store=h.store, clock=h.clock, concurrency=1)
    starts = _starts(h, ids)
    assert len(starts) == 6
    # 3 calls spend 1,200 tokens: the 4th waits until the first call's tokens leave the window.
    assert starts[3] - starts[0] >= dt.timedelta(minutes=1)
    assert starts[2] - starts[0] < dt.timedelta(seconds=1)


async def test_concurrency__never_more_than_n_attempts_at_once(h):
    inside, peak = 0, 0

    async def call(step):
        nonlocal inside, peak
        inside += 1
        peak = max(peak, inside)
        await asyncio.sleep(0.01)
        inside -= 1
        return "ok"

    reg = _limited(Limiter("crm", concurrency=2), call)
    client = h.client(reg, "wf")
    ids = [(await client.aget_or_create([f"c{i}"])).run_id for i in range(8)]
    await arun_until_idle(reg, store=h.store, clock=h.clock, concurrency=8)
    assert [(await h.store.aget_run(rid)).status for rid in ids] == ["completed"] * len(ids)
    assert peak == 2


async def test_waiting_for_the_limiter__recorded_with_no_attempt_spent(h):
    reg = _limited(Limiter("api", requests_per_minute=1), lambda s: "ok")
    client = h.client(reg, "wf")
    first = await client.aget_or_create(["a"])
    second = await client.aget_or_create(["b"])
    await arun_until_idle(reg, store=h.store, clock=h.clock, advance=False)
    runs = [await h.store.aget_run(first.run_id), await h.store.aget_run(second.run_id)]
    waiting = [r for r in runs if r.status == "waiting"]
    assert len(waiting) == 1 and sorted(r.status for r in runs) == ["completed", "waiting"]
    entry = h.entries(waiting[0].id)["call"]
    assert (entry.status, entry.attempts) == ("waiting", 0)
    assert entry.meta["waiting_for"]["limiter"] == "api"
    assert entry.meta["waiting_for"]["limits"] == "1 req/min"
    await arun_until_idle(reg, store=h.store, clock=h.clock)
    assert (await h.store.aget_run(waiting[0].id)).status == "completed"
    assert h.entries(waiting[0].id)["call"].attempts == 1


async def test_unknown_limiter__fails_the_run_naming_it(h):
    async def body(ctx):
        return await ctx.step("call", lambda s: 1, limit="nope")

    reg = setup(use={"wf": workflow(body)}, limiters=[Limiter("api", concurrency=1)])
    handle = await h.client(reg, "wf").aget_or_create(["x"])
    await h.run(reg)
    info = await handle.ainfo()
    assert info.status == "failed"
    assert "no limiter named 'nope'" in info.error["message"]


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({}, "limits nothing"),
        ({"requests_per_minute": 0}, "requests_per_minute must be a whole number >= 1"),
        ({"concurrency": 2.5}, "concurrency must be a whole number >= 1"),
        ({"tokens_per_minute": True}, "tokens_per_minute must be a whole number >= 1"),
    ],
)
def test_limiter__bad_figures_are_a_clear_error(kwargs, words):
    with pytest.raises(BadInput, match=words):
        Limiter("x", **kwargs)


def test_registry__a_limiter_registered_twice_is_refused():
    with pytest.raises(ValueError, match="registered twice"):
        setup(use={}, limiters=[Limiter("a", concurrency=1), Limiter("a", concurrency=2)])
