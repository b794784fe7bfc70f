"""The executor over the real store on the test database: every primitive and guarantee."""

from __future__ import annotations

import asyncio
import datetime as dt

import pydantic
import pytest

from workflows import CriticalError, RetryAfter, event, queue, setup, workflow
from workflows.core.exceptions import InvalidMessage, RunFinished, UnknownQueue
from workflows.engine.execution import Execution


def one(fn, **kw):
    return setup(use={"wf": workflow(fn, **kw)})


async def test_straight_run__body_runs_once_one_commit_per_step(h):
    calls = {"body": 0}

    async def body(ctx):
        calls["body"] += 1
        a = await ctx.step("a", lambda s: 1)
        b = await ctx.step("b", lambda s: a + 1)
        return b

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert (run.status, run.result) == ("completed", 2)
    assert calls["body"] == 1
    assert h.store.commits == 3  # two steps + the completion


async def test_replay__recorded_steps_never_run_again(h):
    runs = []

    async def body(ctx):
        a = await ctx.step("a", lambda s: runs.append("a") or 10)
        await ctx.sleep("nap", 3600)
        return await ctx.step("b", lambda s: runs.append("b") or a + 1)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert runs == ["a", "b"]
    assert (await handle.ainfo()).result == 11


async def test_retry__backoff_counts_from_attempt_start_and_exhausts(h):
    async def flaky(step):
        raise RuntimeError(f"boom {step.attempt}")

    async def body(ctx):
        await ctx.step("s", flaky, max_retries=3, retry_backoff_base=2.0, retry_backoff_max=10.0)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    attempts = h.attempts(run.id, "s")
    assert [a.delay for a in attempts] == [4.0, 8.0, 10.0, None]
    assert all(a.retry_at == a.started_at + dt.timedelta(seconds=a.delay) for a in attempts[:3])
    assert attempts[1].started_at >= attempts[0].retry_at
    assert run.status == "failed" and run.error["kind"] == "exhausted" and run.error["step"] == "s"
    assert h.entries(run.id)["s"].status == "failed"


async def test_retry__critical_error_stops_at_once_and_stays_terminal(h):
    calls = []

    async def body(ctx):
        await ctx.step("s", lambda s: calls.append(1) or (_ for _ in ()).throw(CriticalError("bad key")))

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert len(calls) == 1
    run = await handle.ainfo()
    assert run.status == "failed" and run.error["kind"] == "critical"
    # a later wake never runs it again
    h.wake_early(run.id)
    await h.run(reg)
    assert len(calls) == 1


async def test_retry__retry_after_sets_the_wait(h):
    async def limited(step):
        if step.attempt == 1:
            raise RetryAfter(42)
        return "ok"

    async def body(ctx):
        return await ctx.step("s", limited)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.result == "ok"
    first = h.attempts(run.id, "s")[0]
    assert first.delay == 42 and first.retry_at == first.finished_at + dt.timedelta(seconds=42)


async def test_timeout__fails_at_once_and_cancels_the_step(h):
    cancelled = asyncio.Event()

    async def slow(step):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def body(ctx):
        await ctx.step("slow", slow, timeout=0.05)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert cancelled.is_set()
    assert run.status == "failed" and run.error["kind"] == "timeout"
    assert len(h.attempts(run.id, "slow")) == 1


async def test_timeout__retries_when_retry_on_timeout(h):
    async def slow_then_fast(step):
        if step.attempt < 3:
            await asyncio.sleep(30)
        return step.attempt

    async def body(ctx):
        return await ctx.step("s", slow_then_fast, timeout=0.05, retry_on_timeout=True)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).result == 3


async def test_state__failed_attempt_changes_do_not_commit(h):
    async def step_fn(step):
        step.state["touched"] = step.attempt
        if step.attempt == 1:
            raise RuntimeError("first fails")
        return None

    async def body(ctx):
        await ctx.step("s", step_fn)
        ctx.state["after"] = True

    seen = []

    async def spy(ctx):
        await body(ctx)
        seen.append(dict(ctx.state))

    reg = one(spy, state=lambda: {"touched": 0})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    run_id = handle.run_id
    # run only the first attempt: the claim/execute happens, then the run waits on backoff
    from workflows.engine.runner import Runner

    await Runner(registry=reg, store=h.store, clock=h.clock, watch=False).run_due()
    assert h.store.get_run(run_id).state == {"touched": 0}
    await h.run(reg)
    assert h.store.get_run(run_id).state == {"touched": 2, "after": True}


async def test_events__persisted_and_body_broadcast_not_repeated_on_replay(h):
    class Progress(pydantic.BaseModel):
        stage: str

    async def body(ctx):
        ctx.broadcast("progress", {"stage": "start"})
        await ctx.step("a", lambda s: s.broadcast("progress", {"stage": "a"}))
        await ctx.sleep("nap", 10)
        ctx.broadcast("progress", {"stage": "end"})

    reg = one(body, events={"progress": event(Progress)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert [e.payload["stage"] for e in await handle.aevents()] == ["start", "a", "end"]


async def test_events__bad_payload_fails_the_step_naming_the_event(h):
    class Progress(pydantic.BaseModel):
        stage: str

    async def body(ctx):
        await ctx.step("a", lambda s: s.broadcast("progress", {"nope": 1}))

    reg = one(body, events={"progress": event(Progress)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and "progress" in run.error["message"] and run.error["kind"] == "critical"


async def test_divergence__changed_code_fails_the_run_naming_both(h):
    async def v1(ctx):
        await ctx.step("extract", lambda s: 1)
        await ctx.sleep("nap", 10)

    async def v2(ctx):
        try:
            await ctx.step("summarize", lambda s: 1)
        except Exception:
            pass  # user code swallowing it must not hide the divergence
        await ctx.sleep("nap", 10)

    reg1 = one(v1)
    handle = await h.client(reg1, "wf").aget_or_create(["k"])
    from workflows.engine.runner import Runner

    await Runner(registry=reg1, store=h.store, clock=h.clock, watch=False).run_due()
    h.clock.advance(20)
    await h.run(one(v2))
    run = await handle.ainfo()
    assert run.status == "failed" and run.error["name"] == "HistoryDiverged"
    assert "'summarize'" in run.error["message"] and "'extract'" in run.error["message"]


async def test_duplicate_step_name_fails_the_run(h):
    async def body(ctx):
        await ctx.step("a", lambda s: 1)
        await ctx.step("a", lambda s: 2)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and run.error["name"] == "DuplicateEntryName"


async def test_not_json_output_fails_the_step_naming_it(h):
    async def body(ctx):
        await ctx.step("make-set", lambda s: {1, 2})

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and "make-set" in run.error["message"]
    assert len(h.attempts(run.id, "make-set")) == 1


async def test_queue__next_waits_then_takes_fifo_and_times_out(h):
    async def body(ctx):
        first = await ctx.queue.next("w1", names=["q"])
        batch = await ctx.queue.next_batch("w2", names=["q"], count=5)
        late = await ctx.queue.next("w3", names=["q"], timeout=60)
        return [first.body, [m.body for m in batch], late]

    reg = one(body, queues={"q": queue()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).status == "waiting"
    for n in range(3):
        await handle.asend("q", n)
    await h.run(reg)
    assert (await handle.ainfo()).result == [0, [1, 2], None]


async def test_queue__completable_message_answers_the_sender(h):
    async def body(ctx):
        msg = await ctx.queue.next("approval", names=["approve"], completable=True)
        await msg.complete({"ok": msg.body["who"]})

    reg = one(body, queues={"approve": queue()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    sent = await handle.asend("approve", {"who": "ann"})
    await h.run(reg)
    assert h.store.get_message(sent.id).response == {"ok": "ann"}


async def test_queue__bad_sends_are_rejected_and_store_nothing(h):
    class Start(pydantic.BaseModel):
        title: str

    async def body(ctx):
        await ctx.queue.next("w", names=["start"])

    reg = one(body, queues={"start": queue(Start)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    with pytest.raises(UnknownQueue):
        await handle.asend("nope", {})
    with pytest.raises(InvalidMessage) as caught:
        await handle.asend("start", {"title": 3})
    assert "title" in str(caught.value)
    assert h.message_count() == 0


async def test_sleep__replay_never_extends_the_timer(h):
    async def body(ctx):
        await ctx.sleep("nap", 100)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    from workflows.engine.runner import Runner

    await Runner(registry=reg, store=h.store, clock=h.clock, watch=False).run_due()
    wake = h.entries(handle.run_id)["nap"].wake_at
    h.clock.advance(50)
    h.wake_early(handle.run_id)  # a spurious wake: the replay at t+50 must keep the original wake
    await Runner(registry=reg, store=h.store, clock=h.clock, watch=False).run_due()
    assert h.entries(handle.run_id)["nap"].wake_at == wake
    assert h.store.get_run(handle.run_id).wake_at == wake


async def test_on_error__sees_each_failed_attempt_once_with_the_shape(h):
    seen = []

    def on_error(c, ev):
        seen.append(ev.step)
        c.state["last_error"] = ev.step.error["message"]
        c.broadcast("progress", {"retry": ev.step.will_retry})

    async def flaky(step):
        if step.attempt < 3:
            raise RuntimeError(f"model returned 429 ({step.attempt})")
        return "done"

    async def body(ctx):
        return await ctx.step("extract", flaky, max_retries=6, retry_backoff_base=2.0)

    reg = one(body, on_error=on_error, events={"progress": event()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert [(e.attempt, e.will_retry, e.retry_delay, e.remaining_retries) for e in seen] == [
        (1, True, 4.0, 6),
        (2, True, 8.0, 5),
    ]
    assert (
        seen[0].max_retries == 6
        and seen[0].retry_at is not None
        and "Traceback" in seen[0].error["traceback"]
    )
    run = await handle.ainfo()
    assert run.state["last_error"] == "model returned 429 (2)"
    assert [e.payload for e in await handle.aevents()] == [{"retry": True}, {"retry": True}]


async def test_on_error__an_exception_in_it_is_not_fatal(h):
    def on_error(c, ev):
        raise ValueError("observer bug")

    async def body(ctx):
        return await ctx.step("s", lambda s: 1 if s.attempt > 1 else 1 / 0)

    reg = one(body, on_error=on_error)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).result == 1


async def test_on_error__workflow_failures_are_reported(h):
    seen = []

    async def body(ctx):
        raise KeyError("oops")

    reg = one(body, on_error=lambda c, ev: seen.append(ev))
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert seen[0].workflow.error["name"] == "KeyError" and seen[0].step is None
    assert (await handle.ainfo()).status == "failed"


async def test_cancel__waiting_run_ends_cancelled_and_never_runs_again(h):
    calls = []

    async def body(ctx):
        await ctx.queue.next("w", names=["q"])
        await ctx.step("after", lambda s: calls.append(1))

    reg = one(body, queues={"q": queue()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    await handle.acancel()
    await h.run(reg)
    assert (await handle.ainfo()).status == "cancelled"
    with pytest.raises(RunFinished):
        await handle.asend("q", 1)
    await h.run(reg)
    assert calls == []


async def test_cancel__running_run_stops_at_its_next_entry(h):
    calls = []
    holder = {}

    async def first(step):
        await holder["handle"].acancel()
        return 1

    async def body(ctx):
        await ctx.step("first", first)
        await ctx.step("second", lambda s: calls.append(1))

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    holder["handle"] = handle
    await h.run(reg)
    assert (await handle.ainfo()).status == "cancelled"
    assert calls == []


async def test_lease_lost__execution_writes_nothing_more(h):
    async def body(ctx):
        await ctx.step("a", lambda s: 1)
        await ctx.step("b", lambda s: 2)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    [run] = h.store.claim(owner="me", workflows=["wf"], limit=1, lease_seconds=30, now=h.clock.now())
    h.steal_lease(run.id, "other")
    execution = Execution(
        run=run, definition=reg.get("wf"), registry=reg, history=[], store=h.store, clock=h.clock, owner="me"
    )
    outcome = await execution.execute()
    assert outcome.status == "lost"
    assert h.store.load_history(handle.run_id) == []


async def test_send_to_another_workflow_creates_it(h):
    async def parent(ctx):
        await ctx.step("notify", lambda s: s.queue.send("inbox", {"hi": 1}, workflow="child", key=["c1"]))

    async def child(ctx):
        msg = await ctx.queue.next("w", names=["inbox"])
        return msg.body

    reg = setup(use={"parent": workflow(parent), "child": workflow(child, queues={"inbox": queue()})})
    await h.client(reg, "parent").aget_or_create(["p"])
    await h.run(reg)
    child_run = await h.client(reg, "child").aget(["c1"])
    assert (await child_run.ainfo()).result == {"hi": 1}


async def test_send_from_a_failed_attempt_is_dropped(h):
    async def step_fn(step):
        step.queue.send("q", {"attempt": step.attempt})
        if step.attempt == 1:
            raise RuntimeError("fails after sending")

    async def body(ctx):
        await ctx.step("s", step_fn)
        msg = await ctx.queue.next("w", names=["q"])
        return msg.body

    reg = one(body, queues={"q": queue()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).result == {"attempt": 2}
    assert h.message_count() == 1


async def test_actions_read_the_state(h):
    async def body(ctx):
        await ctx.step("s", lambda s: s.state.update(stage="done"))

    reg = one(body, state=lambda: {"stage": "queued"}, actions={"status": lambda c: c.state["stage"]})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    assert await handle.aaction("status") == "queued"
    await h.run(reg)
    assert await handle.aaction("status") == "done"


async def test_get_or_create_is_idempotent_and_key_validated(h):
    from workflows.core.exceptions import InvalidKey

    async def body(ctx):
        return None

    reg = one(body)
    client = h.client(reg, "wf")
    a = await client.aget_or_create(["same"])
    b = await client.aget_or_create(("same",))
    assert a.run_id == b.run_id
    for bad in ("notalist", [1], [], None):
        with pytest.raises(InvalidKey):
            await client.aget_or_create(bad)


async def test_removed_trailing_step_is_reported_as_divergence(h):
    async def v1(ctx):
        await ctx.step("a", lambda s: 1)
        await ctx.step("b", lambda s: 2)
        await ctx.sleep("nap", 5)

    async def v2(ctx):
        await ctx.step("a", lambda s: 1)

    reg1 = one(v1)
    handle = await h.client(reg1, "wf").aget_or_create(["k"])
    from workflows.engine.runner import Runner

    await Runner(registry=reg1, store=h.store, clock=h.clock, watch=False).run_due()
    h.clock.advance(10)
    await h.run(one(v2))
    run = await handle.ainfo()
    assert run.status == "failed" and run.error["name"] == "HistoryDiverged"


async def test_events__a_steps_broadcast_is_stored_while_the_step_still_runs(h):
    seen = []
    holder = {}

    async def slow_call(step):
        step.broadcast("progress", {"stage": "calling"})
        for _ in range(1000):
            if len(await holder["handle"].aevents()) == 2:
                break
            await asyncio.sleep(0.01)
        seen.append([e.payload for e in await holder["handle"].aevents()])
        raise RuntimeError("and then it fails")

    def sync_step(step):
        step.broadcast("progress", {"stage": "from a thread"})
        return 1

    async def body(ctx):
        await ctx.step("sync", sync_step)
        await ctx.try_step("slow", slow_call, max_retries=0)

    reg = one(body, events={"progress": event()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    holder["handle"] = handle
    await h.run(reg)
    assert seen == [[{"stage": "from a thread"}, {"stage": "calling"}]]
    # an observation stays even though the attempt failed
    assert [e.payload["stage"] for e in await handle.aevents()] == ["from a thread", "calling"]


async def test_slow_step__is_marked_running_while_it_runs_then_completed_in_place(h):
    from workflows.engine import steps as executor

    seen = []
    holder = {}

    async def slow(step):
        for _ in range(1000):
            running = [e for e in h.store.load_history(holder["id"]) if e.status == "running"]
            if running:
                seen.append((running[0].name, running[0].attempts))
                return "done"
            await asyncio.sleep(0.01)
        return "never marked"

    async def body(ctx):
        await ctx.step("fast", lambda s: 1)
        return await ctx.step("slow", slow)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    holder["id"] = handle.run_id
    original, executor.STEP_MARK_AFTER = executor.STEP_MARK_AFTER, 0.05
    try:
        await h.run(reg)
    finally:
        executor.STEP_MARK_AFTER = original
    assert seen == [("slow", 0)]
    entries = h.store.load_history(handle.run_id)
    assert [(e.name, e.status) for e in entries] == [("fast", "completed"), ("slow", "completed")]
    assert (await handle.ainfo()).result == "done"


async def test_crash_mid_step__a_running_record_resumes_as_the_next_attempt(h):
    from workflows.core.records import Commit, EntryWrite

    calls = []

    async def body(ctx):
        return await ctx.step("call", lambda s: calls.append(s.attempt) or s.attempt)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    # what a runner killed mid-attempt leaves: the `running` marker and nothing else
    [run] = h.store.claim(owner="dead", workflows=["wf"], limit=1, lease_seconds=30, now=h.clock.now())
    marker = EntryWrite(id=None, scope="", position=0, name="call", kind="step", status="running", attempts=0)
    h.store.commit(run_id=run.id, owner="dead", commit=Commit(entries=[(marker, None)]), now=h.clock.now())
    h.wake_early(run.id)
    h.steal_lease(run.id, "")
    await h.run(reg)
    # the cut attempt is recorded as lost; the rerun is attempt 2
    assert calls == [2] and (await handle.ainfo()).result == 2
    assert [a.outcome for a in h.attempts(handle.run_id, "call")] == ["lost", "ok"]


async def test_runner__survives_a_store_outage_and_goes_on(h, monkeypatch):
    from workflows.engine import runner as runner_module
    from workflows.engine.runner import Runner

    monkeypatch.setattr(runner_module, "STORE_RETRY_BASE", 0.01)
    calls = {"claim": 0}
    real_claim = h.store.claim

    def flaky_claim(**kwargs):
        calls["claim"] += 1
        if calls["claim"] <= 3:
            raise ConnectionError("database restarting")
        return real_claim(**kwargs)

    monkeypatch.setattr(h.store, "claim", flaky_claim)

    async def body(ctx):
        return await ctx.step("s", lambda s: "done")

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    runner = Runner(registry=reg, store=h.store, clock=h.clock, watch=False)
    await asyncio.wait_for(runner.run(until_idle=True), 10)
    assert calls["claim"] > 3
    assert (await handle.ainfo()).result == "done"


def _sender_to_a_finished_run(on_error, sender_body):
    """A `target` run and a `sender` whose step "notify" sends to the target of the same key."""

    async def target(ctx):
        return "done"

    return setup(
        use={
            "sender": workflow(sender_body, on_error=on_error),
            "target": workflow(target, queues={"inbox": queue()}),
        }
    )


async def test_send_to_a_finished_run__fails_that_step_as_critical_at_once(h):
    seen, calls = [], []

    def notify(s):
        calls.append(s.attempt)
        s.queue.send("inbox", {"hi": 1}, workflow="target", key=["k"])
        return "sent"

    async def sender(ctx):
        result = await ctx.try_step("notify", notify, max_retries=3)
        return {"ok": result.ok, "kind": result.failure.kind, "name": result.failure.error["name"]}

    reg = _sender_to_a_finished_run(lambda c, ev: seen.append(ev), sender)
    target = await h.client(reg, "target").aget_or_create(["k"])
    await h.run(reg)
    assert (await target.ainfo()).status == "completed"
    handle = await h.client(reg, "sender").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    # the run goes on: the refused send is the step's failure, returned by try_step as data
    assert (run.status, run.error) == ("completed", None)
    assert run.result == {"ok": False, "kind": "critical", "name": "RunFinished"}
    assert calls == [1]  # critical: never retried
    entry = h.entries(run.id)["notify"]
    assert entry.status == "failed" and entry.error["kind"] == "critical"
    assert entry.error["name"] == "RunFinished"
    [attempt] = h.attempts(run.id, "notify")
    assert attempt.outcome == "critical"
    assert [(ev.step.step_name, ev.step.attempt, ev.step.will_retry) for ev in seen] == [("notify", 1, False)]
    assert seen[0].workflow is None and seen[0].step.error["name"] == "RunFinished"
    assert h.message_count() == 0  # nothing was stored for the finished run
    assert (await target.ainfo()).status == "completed"


async def test_send_to_a_finished_run__a_plain_step_fails_the_run_as_that_step(h):
    seen = []

    async def sender(ctx):
        await ctx.step("notify", lambda s: s.queue.send("inbox", 1, workflow="target", key=["k"]))

    reg = _sender_to_a_finished_run(lambda c, ev: seen.append(ev), sender)
    await h.client(reg, "target").aget_or_create(["k"])
    await h.run(reg)
    handle = await h.client(reg, "sender").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    # failed as the step "notify" (StepFailed, kind critical), not by a RunFinished from the body
    assert run.status == "failed"
    assert (run.error["name"], run.error["step"], run.error["kind"]) == ("StepFailed", "notify", "critical")
    assert len(h.attempts(run.id, "notify")) == 1
    assert [ev.step.step_name for ev in seen if ev.step] == ["notify"]
    assert h.message_count() == 0


def test_on_error__an_async_handler_is_refused_when_the_workflow_is_defined():
    async def body(ctx):
        return None

    async def async_handler(c, ev):
        return None

    class AsyncCallable:
        async def __call__(self, c, ev):
            return None

    class PlainCallable:
        def __call__(self, c, ev):
            return None

    for handler in (async_handler, AsyncCallable()):
        with pytest.raises(TypeError, match="on_error"):
            workflow(body, on_error=handler)
    assert workflow(body, on_error=PlainCallable()).on_error is not None  # a plain callable is fine
