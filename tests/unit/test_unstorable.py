"""Text PostgreSQL cannot store (NUL, a lone surrogate) and too deep JSON, at every engine entry
point: a clear error naming the step or the field, and nothing stored. Over the real store on the
test database (it is PostgreSQL that cannot store NUL or a lone surrogate: run it there too)."""

from __future__ import annotations

import pytest

from workflows import CriticalError, event, queue, setup, workflow
from workflows.core.exceptions import InvalidKey, NotRecordable
from workflows.core.jsonvalue import MAX_DEPTH
from workflows.core.records import Audit

LONE = "\ud83d"  # the first half of 😀, without its second half
SMILE = "\U0001f600"


def nested(depth: int, leaf=0):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def one(fn, **kw):
    return setup(use={"wf": workflow(fn, **kw)})


def returning(output):
    async def body(ctx):
        await ctx.step("make", lambda s: output, max_retries=5)
        return "unreachable"

    return one(body)


@pytest.mark.parametrize(
    ("output", "problem"),
    [
        (f"a{LONE}b", "lone surrogate (\\ud83d)"),
        ({f"key{LONE}": 1}, "lone surrogate (\\ud83d)"),
        ([{"deep": ["\udfff"]}], "lone surrogate (\\udfff)"),
        ({"k": "nul\x00"}, "NUL character"),
        (nested(MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} levels"),
        (nested(5000), f"nested more than {MAX_DEPTH} levels"),
    ],
    ids=["text", "dict-key", "nested", "nul", "too-deep", "far-too-deep"],
)
async def test_step_output__unstorable_fails_that_step_at_once_naming_it(h, output, problem):
    reg = returning(output)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)

    run = await handle.ainfo()
    assert run.status == "failed"
    assert "step 'make'" in run.error["message"] and problem in run.error["message"]
    entry = h.entries(run.id)["make"]
    assert entry.status == "failed" and entry.output is None
    assert len(h.attempts(run.id, "make")) == 1  # a caller's mistake: not retried


async def test_step_output__real_astral_characters_and_max_depth_are_recorded(h):
    output = {"smile": SMILE, "escaped-text": "\\ud83d", "deep": nested(MAX_DEPTH - 1)}

    async def body(ctx):
        return await ctx.step("make", lambda s: output)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)

    run = await handle.ainfo()
    assert (run.status, run.result) == ("completed", output)
    assert h.entries(run.id)["make"].output == output


async def test_step_state_and_event__unstorable_fail_the_step_naming_them(h):
    async def body(ctx):
        async def writes_state(step):
            step.state["title"] = LONE

        await ctx.step("writes", writes_state, max_retries=0)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and "the state written by step 'writes'" in run.error["message"]
    assert run.state == {}

    async def broadcasts(ctx):
        await ctx.step("tell", lambda s: s.broadcast("progress", {"stage": LONE}), max_retries=0)

    reg = one(broadcasts, events={"progress": event()})
    handle = await h.client(reg, "wf").aget_or_create(["k2"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and "progress" in run.error["message"]
    assert h.store.list_events(run.id) == []


async def test_step_error__unstorable_text_in_an_exception_is_recorded_escaped(h):
    async def body(ctx):
        async def fails(step):
            raise CriticalError(f"the CRM said {LONE} and \x00")

        await ctx.step("call", fails)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)

    run = await handle.ainfo()
    assert run.status == "failed" and "'call'" in run.error["message"]
    [attempt] = h.attempts(run.id, "call")
    assert "the CRM said \\ud83d and \\u0000" in attempt.error["message"]


@pytest.mark.parametrize("key", [[LONE], ["a", f"b{LONE}"], ["\x00"], ["\udcff"]])
async def test_run_key__unstorable_is_invalid_and_creates_nothing(h, key):
    reg = returning(1)
    client = h.client(reg, "wf")
    with pytest.raises(InvalidKey, match="run key contains"):
        await client.aget_or_create(key)
    with pytest.raises(InvalidKey):
        client.get_or_create(key)
    assert (await client.aget_or_create([SMILE])).created  # a real astral character is a fine key


async def test_send__unstorable_or_too_deep_body_is_refused_and_nothing_is_stored(h):
    async def body(ctx):
        await ctx.queue.next("w", names=["q"])

    reg = one(body, queues={"q": queue()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    for bad in ({"note": LONE}, [{f"x{LONE}": 1}], "\x00", nested(MAX_DEPTH + 1), nested(100_000)):
        with pytest.raises(NotRecordable, match=r"queue wf\.q"):
            await handle.asend("q", bad)
    assert h.message_count() == 0

    await handle.asend("q", {"note": SMILE, "deep": nested(MAX_DEPTH - 1)})
    assert h.message_count() == 1


async def test_send_from_a_step__to_an_unstorable_key_fails_that_step(h):
    async def body(ctx):
        await ctx.step("fan-out", lambda s: s.queue.send("q", 1, workflow="wf", key=[LONE]))

    reg = one(body, queues={"q": queue()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and "'fan-out'" in run.error["message"]
    assert h.message_count() == 0


def _fails_once():
    state = {"ok": False}

    async def body(ctx):
        async def call(step):
            if not state["ok"]:
                raise CriticalError("no")
            return step.input

        return await ctx.step("call", call, input={"company": "Acme"})

    return setup(use={"wf": workflow(body)}), state


@pytest.mark.parametrize("bad", [{"company": LONE}, {f"k{LONE}": 1}, "\x00", nested(MAX_DEPTH + 1)])
async def test_replay__an_unstorable_edited_input_is_refused_and_changes_nothing(h, bad):
    reg, _ = _fails_once()
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    before = h.entries(handle.run_id)["call"]

    with pytest.raises(NotRecordable, match="the edited input"):
        h.store.replay(handle.run_id, before.id, audit=Audit(actor="ops"), now=h.clock.now(), input=bad)

    assert (await handle.ainfo()).status == "failed"
    assert h.entries(handle.run_id)["call"] == before
    assert h.store.superseded(handle.run_id) == [] and h.store.audit_log(handle.run_id) == []


@pytest.mark.parametrize("reason", [f"fixed {LONE}", "\udcff (argv bytes that are not UTF-8)", "a\x00"])
async def test_repairs__an_unstorable_reason_is_refused_and_changes_nothing(h, reason):
    reg, _ = _fails_once()
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)

    with pytest.raises(NotRecordable, match="the reason contains"):
        h.store.replay(
            handle.run_id,
            h.entries(handle.run_id)["call"].id,
            audit=Audit(actor="ops", reason=reason),
            now=h.clock.now(),
        )
    with pytest.raises(NotRecordable, match="the operator's name contains"):
        Audit(actor=f"cli:{LONE}", reason="ok")

    assert (await handle.ainfo()).status == "failed"
    assert h.store.superseded(handle.run_id) == [] and h.store.audit_log(handle.run_id) == []
