"""Events of a lost attempt. A step's events are stored while it runs (live progress); when a
crash or a store failure cuts the attempt off, the rerun broadcasts again. Before the run executes
again, the cut attempt's events are marked `lost` and named in a `$lost` event, so a follower drops
them and a reader of the history sees which ones to ignore; a step that was marked running has its
cut attempt recorded as `lost`, and the rerun is its next attempt. Over the real store on the test
database here; a SIGKILLed runner in tests/acceptance/test_crash_flows.py."""

from __future__ import annotations

from workflows import event, setup, workflow
from workflows.core.records import LOST_EVENTS, Commit, EventOrigin

from .test_store_failures import Blink, quick_store_retries  # noqa: F401 - the fixture, used here too


def _publishing(posts: list[str]):
    async def body(ctx):
        async def publish(step):
            posts.append(step.key[0])
            step.broadcast("progress", {"stage": "published", "attempt": len(posts)})
            return "url"

        return await ctx.step("publish", publish)

    return setup(use={"wf": workflow(body, events={"progress": event()})})


def _events(h, run_id):
    return h.store.list_events(run_id)


async def test_a_cut_attempts_events_are_marked_lost_and_named_in_a_lost_event(h):
    posts: list[str] = []
    reg = _publishing(posts)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    # The step's record never lands: the attempt is cut after it broadcast.
    blink = Blink(
        h.store, "commit", when=lambda kw: any(w.name == "publish" for w, _a in kw["commit"].entries)
    )
    await h.run(reg)

    assert blink.failed == 1 and len(posts) == 2
    assert (await handle.ainfo()).status == "completed"
    first, lost, second = _events(h, handle.run_id)
    assert (first.name, first.payload["attempt"], first.step, first.attempt, first.lost) == (
        "progress", 1, "publish", 1, True,
    )  # fmt: skip
    assert lost.name == LOST_EVENTS
    assert lost.payload == {"events": [first.id], "attempts": [{"step": "publish", "attempt": 1}]}
    assert (second.payload["attempt"], second.step, second.attempt, second.lost) == (2, "publish", 1, False)
    assert first.as_json()["lost"] is True and "lost" not in second.as_json()


async def test_events_of_a_failed_attempt_are_not_lost__its_outcome_is_recorded(h):
    calls: list[int] = []

    async def body(ctx):
        async def flaky(step):
            calls.append(step.attempt)
            step.broadcast("progress", {"try": step.attempt})
            if step.attempt == 1:
                raise RuntimeError("503 from the CRM")
            return "ok"

        return await ctx.step("enrich", flaky, retry_backoff_base=0.001)

    reg = setup(use={"wf": workflow(body, events={"progress": event()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)

    assert (await handle.ainfo()).status == "completed"
    events = _events(h, handle.run_id)
    assert [(e.name, e.attempt, e.lost) for e in events] == [("progress", 1, False), ("progress", 2, False)]


async def test_events_of_a_step_completed_at_its_first_attempt_stay_when_a_later_steps_attempt_is_cut(h):
    # Over the Django store such a step stores no attempt row (its entry implies it): its events
    # must still count as those of a recorded attempt.
    posts: list[int] = []

    async def body(ctx):
        async def fetch(step):
            step.broadcast("progress", {"stage": "fetched"})
            return 1

        async def publish(step):
            posts.append(step.attempt)
            step.broadcast("progress", {"stage": "published", "try": len(posts)})
            return "url"

        await ctx.step("fetch", fetch)
        return await ctx.step("publish", publish)

    reg = setup(use={"wf": workflow(body, events={"progress": event()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    blink = Blink(
        h.store, "commit", when=lambda kw: any(w.name == "publish" for w, _a in kw["commit"].entries)
    )
    await h.run(reg)

    assert blink.failed == 1 and (await handle.ainfo()).status == "completed"
    progress = [
        (e.step, e.payload.get("try"), e.lost) for e in _events(h, handle.run_id) if e.name == "progress"
    ]
    assert progress == [("fetch", None, False), ("publish", 1, True), ("publish", 2, False)]
    assert [a.outcome for a in h.attempts(handle.run_id, "fetch")] == ["ok"]


def _claimed(h, reg, key: str):
    handle = h.client(reg, "wf").get_or_create([key])
    [run] = h.store.claim(owner="r1", workflows=["wf"], limit=1, lease_seconds=30, now=h.clock.now())
    assert run.id == handle.run_id
    return run


def _live(run_id, h, *events):
    h.store.commit(run_id=run_id, owner="r1", commit=Commit(live_events=list(events)), now=h.clock.now())


def test_a_runner_stopping_mid_step_releases_the_run_with_its_cut_attempts_events_lost(h):
    reg = _publishing([])
    run = _claimed(h, reg, "k")
    origin = EventOrigin(scope="", step="publish", attempt=1)
    _live(run.id, h, ("progress", {"n": 1}, origin))

    h.store.release(owner="r1", run_ids=[run.id], now=h.clock.now())

    sent, lost = _events(h, run.id)
    assert sent.lost and lost.name == LOST_EVENTS and lost.payload["events"] == [sent.id]
    [again] = h.store.claim(owner="r2", workflows=["wf"], limit=1, lease_seconds=30, now=h.clock.now())
    assert again.id == run.id and not again.taken_over  # released cleanly: nothing more to mark


def test_a_run_whose_lease_lapsed_is_claimed_as_taken_over(h):
    import datetime as dt

    reg = _publishing([])
    run = _claimed(h, reg, "k")
    assert not run.taken_over
    later = h.clock.now() + dt.timedelta(seconds=31)
    [again] = h.store.claim(owner="r2", workflows=["wf"], limit=1, lease_seconds=30, now=later)
    assert again.id == run.id and again.taken_over


def test_recovery_spares_events_of_recorded_attempts_and_of_pruned_scopes(h):
    reg = _publishing([])
    run = _claimed(h, reg, "k")
    pruned = EventOrigin(scope="/loop#1", step="it", attempt=1)  # its iteration's entries are gone
    cut = EventOrigin(scope="", step="publish", attempt=1)
    _live(run.id, h, ("progress", {"pruned": True}, pruned), ("progress", {"cut": True}, cut))

    h.store.recover_cut_attempts(
        run.id, owner="r1", reason="runner r0 stopped", lost_at=None, now=h.clock.now()
    )

    assert [(e.payload, e.lost) for e in _events(h, run.id)][:2] == [
        ({"pruned": True}, False),
        ({"cut": True}, True),
    ]


def test_recovery_needs_the_lease(h):
    import pytest

    from workflows.core.exceptions import LeaseLost

    reg = _publishing([])
    run = _claimed(h, reg, "k")
    with pytest.raises(LeaseLost):
        h.store.recover_cut_attempts(
            run.id, owner="someone-else", reason="x", lost_at=None, now=h.clock.now()
        )


async def test_a_slow_steps_cut_attempt_is_recorded_as_lost_and_the_rerun_is_the_next_attempt(h):
    """A step marked `running` (it ran longer than STEP_MARK_AFTER) whose runner's lease lapsed."""
    from workflows.core.records import EntryWrite

    reg = _publishing([])
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    [run] = h.store.claim(owner="dead", workflows=["wf"], limit=1, lease_seconds=30, now=h.clock.now())
    # What the dead runner left: the step's running marker, and the event its attempt sent.
    started = h.clock.now()
    marker = EntryWrite(
        id=None,
        scope="",
        position=0,
        name="publish",
        kind="step",
        status="running",
        started_at=started,
        attempts=0,
    )
    h.store.commit(
        run_id=run.id, owner="dead", now=started,
        commit=Commit(entries=[(marker, None)], live_events=[("progress", {"stage": "published", "attempt": 0},
                      EventOrigin(scope="", step="publish", attempt=1))]),
    )  # fmt: skip
    h.clock.advance(31)  # the dead runner's lease lapses
    await h.run(reg)  # a live runner takes it over once the lease has lapsed

    info = await handle.ainfo()
    assert info.status == "completed"
    lost, ok = h.attempts(handle.run_id, "publish")
    assert (lost.number, lost.outcome, ok.number, ok.outcome) == (1, "lost", 2, "ok")
    assert "runner dead stopped responding" in lost.error["message"]
    assert lost.error["name"] == "AttemptLost"
    assert h.entries(handle.run_id)["publish"].attempts == 2
    assert [e.lost for e in _events(h, handle.run_id) if e.name == "progress"] == [True, False]


async def test_a_step_whose_attempts_keep_being_cut_off_fails_once_its_retries_are_used_up(h):
    from workflows.core.records import EntryWrite

    ran: list[int] = []

    async def body(ctx):
        return await ctx.step("oom", lambda s: ran.append(s.attempt), max_retries=1)

    reg = setup(use={"wf": workflow(body)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    for n in range(2):  # two runners die in the step, one after the other
        [run] = h.store.claim(
            owner=f"dead{n}", workflows=["wf"], limit=1, lease_seconds=30, now=h.clock.now()
        )
        if n == 0:
            marker = EntryWrite(
                id=None, scope="", position=0, name="oom", kind="step", status="running", attempts=0
            )
            h.store.commit(
                run_id=run.id, owner="dead0", commit=Commit(entries=[(marker, None)]), now=h.clock.now()
            )
        else:
            h.store.recover_cut_attempts(run.id, owner="dead1", reason="x", lost_at=None, now=h.clock.now())
            entry = h.entries(run.id)["oom"]
            running = EntryWrite(
                id=entry.id,
                scope="",
                position=0,
                name="oom",
                kind="step",
                status="running",
                attempts=entry.attempts,
            )
            h.store.commit(
                run_id=run.id, owner="dead1", commit=Commit(entries=[(running, None)]), now=h.clock.now()
            )
        h.clock.advance(31)
    await h.run(reg)

    info = await handle.ainfo()
    assert ran == []  # never run a third time: 1 + max_retries attempts were all cut off
    assert info.status == "failed" and "no retries are left" in info.error["message"]
    assert [a.outcome for a in h.attempts(handle.run_id, "oom")] == ["lost", "lost"]
