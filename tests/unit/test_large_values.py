"""Values over WORKFLOWS["MAX_VALUE_BYTES"] at every door: a step's output, its input, the state
(written by a step or the body), a message body (client and step), an operator's edited input.
Each is refused naming what and how big, and nothing is stored. Over the real store on the test
database."""

from __future__ import annotations

import pytest

from workflows import ValueTooLarge, queue, setup, workflow
from workflows.core import jsonvalue
from workflows.core.exceptions import NotRecordable
from workflows.core.records import Audit

LIMIT = 1000


@pytest.fixture(autouse=True)
def small_limit(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VALUE_BYTES": LIMIT}


def big(n: int = LIMIT) -> str:
    """A string whose JSON text is n + 1 bytes: just over the limit (the quotes count)."""
    return "x" * (n - 1)


def one(fn, **kw):
    return setup(use={"wf": workflow(fn, **kw)})


def test_the_limit_is_the_setting_read_at_each_check(settings):
    assert jsonvalue.max_bytes() == LIMIT
    assert jsonvalue.dumps("x" * (LIMIT - 2), "v")  # exactly LIMIT bytes with its quotes: fine
    with pytest.raises(ValueTooLarge) as caught:
        jsonvalue.dumps(big(), "the thing")
    assert (caught.value.size, caught.value.limit) == (LIMIT + 1, LIMIT)
    assert str(caught.value) == f"the thing is {LIMIT + 1:,} bytes as JSON, over the limit of {LIMIT:,} bytes"
    assert isinstance(caught.value, NotRecordable)  # every door that refuses unstorable values refuses it

    settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VALUE_BYTES": None}
    assert jsonvalue.dumps(big(10 * LIMIT), "v")  # no limit


def test_non_ascii_text_is_measured_in_utf8_not_in_its_escapes():
    assert jsonvalue.dumps("é" * 499, "v")  # 998 + 2 bytes in UTF-8 (its escaped JSON is 2,996)
    with pytest.raises(ValueTooLarge) as caught:
        jsonvalue.dumps("é" * 500, "v")
    assert caught.value.size == 1002
    with pytest.raises(ValueTooLarge) as caught:
        jsonvalue.dumps(["\U0001f600" * 250], "v")  # 4 bytes each in UTF-8, 12 escaped
    assert caught.value.size == 1004


def test_a_size_is_told_in_mib_when_large():
    error = ValueTooLarge("the output of step 'fetch'", 3 * 1024 * 1024 + 5, 1024 * 1024)
    assert str(error) == (
        "the output of step 'fetch' is 3,145,733 bytes (3.0 MiB) as JSON, "
        "over the limit of 1,048,576 bytes (1.0 MiB)"
    )


async def test_step_output__too_large_fails_that_step_at_once_naming_it_and_the_size(h):
    async def body(ctx):
        await ctx.step("fetch", lambda s: {"page": big()}, max_retries=5)
        return "unreachable"

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)

    run = await handle.ainfo()
    assert run.status == "failed"
    message = run.error["message"]
    assert "step 'fetch'" in message and "the output of step 'fetch'" in message
    assert f"{LIMIT + 10:,} bytes" in message  # {"page":"…"} and f"limit of {LIMIT:,} bytes" in message
    entry = h.entries(run.id)["fetch"]
    assert entry.status == "failed" and entry.output is None
    [attempt] = h.attempts(run.id, "fetch")  # terminal, like a CriticalError: not retried
    assert attempt.outcome == "critical"


async def test_step_output__just_under_the_limit_is_recorded(h):
    value = "y" * (LIMIT - 2)

    async def body(ctx):
        return await ctx.step("fetch", lambda s: value)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert (run.status, h.entries(run.id)["fetch"].output) == ("completed", value)


async def test_step_input__too_large_fails_the_run_naming_the_step_and_records_nothing_of_it(h):
    async def body(ctx):
        await ctx.step("send", lambda s: s.input, input={"doc": big()})

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and "the input of step 'send'" in run.error["message"]
    assert "send" not in h.entries(run.id)


async def test_state__too_large_from_a_step_fails_that_step_and_keeps_the_last_good_state(h):
    async def body(ctx):
        async def writes(step):
            step.state["doc"] = big()

        await ctx.step("writes", writes, max_retries=3)

    reg = one(body, state=lambda: {"stage": "new"})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and "the state written by step 'writes'" in run.error["message"]
    assert run.state == {"stage": "new"}
    assert [a.outcome for a in h.attempts(run.id, "writes")] == ["critical"]


async def test_state__too_large_from_the_body_is_not_recorded(h):
    async def body(ctx):
        ctx.state["doc"] = big()
        await ctx.step("after", lambda s: 1)

    reg = one(body, state=lambda: {"stage": "new"})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and "the run's state" in run.error["message"]
    assert run.state == {"stage": "new"}


async def test_send__too_large_a_body_raises_and_stores_nothing(h):
    async def body(ctx):
        await ctx.queue.next("w", names=["q"])

    reg = one(body, queues={"q": queue()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    with pytest.raises(ValueTooLarge, match=r"queue wf\.q is .* over the limit"):
        await handle.asend("q", {"doc": big()})
    with pytest.raises(ValueTooLarge):
        handle.send("q", big())
    assert h.message_count() == 0

    await handle.asend("q", {"doc": "small"})
    assert h.message_count() == 1


async def test_send_from_a_step__too_large_fails_that_step_and_sends_nothing(h):
    async def body(ctx):
        await ctx.step("fan-out", lambda s: s.queue.send("q", big(), workflow="wf", key=["other"]))

    reg = one(body, queues={"q": queue()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and "'fan-out'" in run.error["message"]
    assert h.message_count() == 0


async def test_replay__too_large_an_edited_input_is_refused_and_changes_nothing(h):
    async def body(ctx):
        async def call(step):
            raise ValueError("down")

        return await ctx.step("call", call, input={"a": 1}, max_retries=0)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    before = h.entries(handle.run_id)["call"]

    with pytest.raises(ValueTooLarge, match="the edited input"):
        h.store.replay(handle.run_id, before.id, audit=Audit(actor="ops"), now=h.clock.now(), input=big())
    assert (await handle.ainfo()).status == "failed"
    assert h.entries(handle.run_id)["call"] == before
    assert h.store.audit_log(handle.run_id) == []


async def test_state__recorded_before_the_limit_was_lowered_is_kept_until_it_changes(h, settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VALUE_BYTES": None}

    async def body(ctx):
        await ctx.queue.next("w", names=["go"])
        await ctx.step("small", lambda s: 1)  # leaves the big state as it is
        ctx.state["more"] = 1  # changes it: now it is refused
        await ctx.step("after", lambda s: 2)

    reg = one(body, state=lambda: {"doc": big()}, queues={"go": queue()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).status == "waiting"

    settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VALUE_BYTES": LIMIT}
    await handle.asend("go")
    await h.run(reg)
    run = await handle.ainfo()
    assert h.entries(run.id)["small"].status == "completed"
    assert run.status == "failed" and "the run's state is" in run.error["message"]
    assert run.state == {"doc": big()} and "after" not in h.entries(run.id)
