"""Schedules and start options over the real store on the test database: one run per fire time
with two runners, the catch-up policy, pause and resume, code sync, debounce and replace."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from workflows import BadInput, queue, schedule, setup, workflow
from workflows.core.new_run import NewRun
from workflows.engine.runner import Runner
from workflows.testing import afire_schedules, arun_until_idle

MINUTE = dt.timedelta(minutes=1)


async def noop(ctx):
    return ctx.state.get("$schedule")


async def waits(ctx):
    msg = await ctx.queue.next("wait", names=["go"])
    return msg.body


def registry(*schedules, **workflows):
    use = {
        "report": workflow(noop, state=lambda: {"stage": "new"}),
        "waiter": workflow(waits, queues={"go": queue()}),
    }
    return setup(use={**use, **workflows}, schedules=list(schedules))


def runner(h, reg, owner):
    return Runner(registry=reg, store=h.store, clock=h.clock, watch=False, owner=owner)


def on_minute(when: dt.datetime) -> dt.datetime:
    return when.replace(second=0, microsecond=0)


def report_runs(h):
    return sorted(
        (r for r in (h.store.get_run(x["run_id"]) for x in _fired(h)) if r.workflow == "report"),
        key=lambda r: r.key,
    )


def _fired(h):
    return [fire for row in h.store.list_schedules() for fire in row.last_runs]


async def test_two_runners__each_fire_time_starts_one_run(h):
    reg = registry(schedule("* * * * *", "report"))
    first, second = runner(h, reg, "r1"), runner(h, reg, "r2")
    await asyncio.gather(first.scheduler.sync(), second.scheduler.sync())
    [row] = h.store.list_schedules()
    assert row.next_fire_at == on_minute(h.clock.now()) + MINUTE
    for _ in range(3):  # three fire times, each checked by both runners at once
        h.clock.set(first.scheduler.next_fire or row.next_fire_at)
        started = await asyncio.gather(first.scheduler.tick(), second.scheduler.tick())
        assert sorted(started) == [0, 1]  # one runner started it; the other wrote nothing
        assert first.scheduler.next_fire == second.scheduler.next_fire == h.clock.now() + MINUTE
    runs = report_runs(h)
    assert len(runs) == 3 and len({r.id for r in runs}) == 3
    fire = on_minute(h.clock.now())
    assert runs[-1].key == ["report", fire.isoformat()]
    assert runs[-1].state == {"stage": "new", "$schedule": {"name": "report", "fire_time": fire.isoformat()}}
    await arun_until_idle(reg, store=h.store, clock=h.clock, advance=False)
    assert h.store.get_run(runs[-1].id).result == {"name": "report", "fire_time": fire.isoformat()}


async def test_a_fire_is_idempotent_by_key__a_second_fire_of_the_same_time_finds_the_run(h):
    reg = registry(schedule("* * * * *", "report"))
    sched = runner(h, reg, "r1").scheduler
    await sched.sync()
    [row] = h.store.list_schedules()
    spec = reg.schedules["report"]
    start = spec.run_start(reg.get("report"), row.next_fire_at)
    made = await h.store.aget_or_create_run(
        NewRun(workflow="report", key=start.key, version=start.version, initial_state={}, now=h.clock.now())
    )
    h.clock.set(row.next_fire_at)
    assert await sched.tick() == 1
    assert [f["run_id"] for f in _fired(h)] == [made[0].id]  # the existing run of that key


@pytest.mark.parametrize(
    ("catch_up", "expected"),
    [("skip", [4]), (0, [4]), (2, [2, 3, 4]), ("all", [0, 1, 2, 3, 4])],
)
async def test_catch_up__a_late_check_starts_the_latest_fire_and_as_many_missed_as_declared(
    h, catch_up, expected
):
    reg = registry(schedule("* * * * *", "report", catch_up=catch_up))
    sched = runner(h, reg, "r1").scheduler
    await sched.sync()
    first = h.store.list_schedules()[0].next_fire_at
    h.clock.set(first + 4 * MINUTE + dt.timedelta(seconds=30))  # runners were down for 5 fire times
    assert await sched.tick() == len(expected)
    keys = [r.key[1] for r in report_runs(h)]
    assert keys == [(first + n * MINUTE).isoformat() for n in expected]
    [row] = h.store.list_schedules()
    assert row.next_fire_at == first + 5 * MINUTE
    assert row.last_fire_at == first + 4 * MINUTE


async def test_timezone__fire_times_and_keys_are_read_in_the_schedules_timezone(h):
    reg = registry(schedule("0 9 * * *", "report", timezone="Europe/Paris", name="morning"))
    sched = runner(h, reg, "r1").scheduler
    await sched.sync()
    [row] = h.store.list_schedules()
    local = row.next_fire_at.astimezone(reg.schedules["morning"].tz)
    assert (local.hour, local.minute) == (9, 0)
    h.clock.set(row.next_fire_at)
    await sched.tick()
    [run] = report_runs(h)
    assert run.key == ["morning", local.isoformat()]
    assert run.key[1].endswith(("+01:00", "+02:00"))


async def test_pause__no_fire_while_paused_and_resume_skips_the_paused_time(h):
    reg = registry(schedule("* * * * *", "report"))
    sched = runner(h, reg, "r1").scheduler
    await sched.sync()
    first = h.store.list_schedules()[0].next_fire_at
    h.store.pause_schedule(
        "report", paused=True, actor="ops", reason="maintenance", next_fire_at=None, now=h.clock.now()
    )
    h.clock.set(first + 3 * MINUTE)
    assert await sched.tick() == 0
    assert report_runs(h) == [] and sched.next_fire is None
    [row] = h.store.list_schedules()
    assert (row.paused, row.paused_by, row.pause_reason) == (True, "ops", "maintenance")
    resumed = reg.schedules["report"].next_after(h.clock.now())
    h.store.pause_schedule(
        "report", paused=False, actor="ops", reason="", next_fire_at=resumed, now=h.clock.now()
    )
    assert await sched.tick() == 0  # nothing passed while paused is caught up
    h.clock.set(resumed)
    assert await sched.tick() == 1
    assert [r.key[1] for r in report_runs(h)] == [resumed.isoformat()]


async def test_pause__unknown_schedule_is_bad_input(h):
    with pytest.raises(BadInput, match="no schedule named 'nope'"):
        h.store.pause_schedule(
            "nope", paused=True, actor="ops", reason="", next_fire_at=None, now=h.clock.now()
        )


async def test_sync__a_schedule_removed_from_code_is_gone_and_kept_and_comes_back(h):
    old = registry(schedule("* * * * *", "report"), schedule("*/5 * * * *", "report", name="five"))
    await runner(h, old, "r1").scheduler.sync()
    h.clock.advance(3600)
    new = registry(schedule("0 * * * *", "report"))  # re-timed; "five" removed
    sched = runner(h, new, "r2").scheduler
    await sched.sync()
    rows = {r.name: r for r in h.store.list_schedules()}
    assert rows["five"].gone and not rows["report"].gone
    assert rows["report"].cron == "0 * * * *"
    assert rows["report"].next_fire_at == new.schedules["report"].next_after(h.clock.now())
    h.clock.set(rows["five"].next_fire_at + 3600 * MINUTE)
    await sched.tick()
    assert all(r.key[0] == "report" for r in report_runs(h))  # a gone schedule never fires
    await runner(h, old, "r3").scheduler.sync()
    assert not {r.name: r for r in h.store.list_schedules()}["five"].gone


async def test_sync__a_runner_leaves_schedules_of_workflows_it_does_not_serve(h):
    await runner(h, registry(schedule("* * * * *", "report")), "r1").scheduler.sync()
    other = setup(use={"other": workflow(noop)})
    await runner(h, other, "r2").scheduler.sync()
    assert not h.store.list_schedules()[0].gone


# --- start options -----------------------------------------------------------------------------------


async def test_debounce__each_start_pushes_the_run_back_and_replaces_its_state(h):
    reg = registry()
    client = h.client(reg, "report")
    t0 = h.clock.now()
    first = await client.aget_or_create(["k"], debounce=10, state={"stage": "one"})
    assert first.created and (await first.ainfo()).wake_at == t0 + dt.timedelta(seconds=10)
    h.clock.advance(6)
    again = await client.aget_or_create(["k"], debounce=10, state={"stage": "two"})
    assert not again.created and again.run_id == first.run_id
    run = await again.ainfo()
    assert run.wake_at == t0 + dt.timedelta(seconds=16) and run.state == {"stage": "two"}
    h.clock.advance(9)  # 15 s after the first start, 9 after the last: not yet
    await arun_until_idle(reg, store=h.store, clock=h.clock, advance=False)
    assert (await first.ainfo()).status == "pending"
    h.clock.advance(1)
    await arun_until_idle(reg, store=h.store, clock=h.clock, advance=False)
    assert (await first.ainfo()).status == "completed"
    late = await client.aget_or_create(["k"], debounce=10, state={"stage": "three"})
    assert late.run_id == first.run_id and (await late.ainfo()).state == {"stage": "two"}  # started: kept


async def test_replace__cancels_the_live_run_and_starts_a_new_one_under_the_key(h):
    reg = registry()
    client = h.client(reg, "waiter")
    old = await client.aget_or_create(["k"])
    await h.run(reg)
    assert (await old.ainfo()).status == "waiting"
    new = await client.aget_or_create(["k"], on_conflict="replace")
    assert new.created and new.run_id != old.run_id
    assert (await client.aget(["k"])).run_id == new.run_id  # the key finds the successor
    assert [(e.name, e.payload) for e in await old.aevents()] == [("$replaced", {"by": new.run_id})]
    await new.asend("go", "hi")
    await h.run(reg)
    assert (await old.ainfo()).status == "cancelled"
    assert (await old.ainfo()).key == ["k"]  # it keeps its key, for the record
    assert ((await new.ainfo()).status, (await new.ainfo()).result) == ("completed", "hi")
    again = await client.aget_or_create(["k"], on_conflict="replace")  # a finished run is replaced too
    assert again.created and again.run_id not in (old.run_id, new.run_id)
    assert (await new.ainfo()).status == "completed"  # finished runs stay as they ended
    existing = await client.aget_or_create(["k"])
    assert existing.run_id == again.run_id and not existing.created


async def test_replace_with_debounce__a_run_not_yet_started_is_pushed_not_replaced(h):
    client = h.client(registry(), "report")
    first = await client.aget_or_create(["k"], debounce=5)
    second = await client.aget_or_create(["k"], on_conflict="replace", debounce=5)
    assert second.run_id == first.run_id and not second.created


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"on_conflict": "newest"}, "on_conflict must be one of existing, replace"),
        ({"debounce": 0}, "debounce must be a number of seconds"),
        ({"debounce": True}, "debounce must be a number of seconds"),
        ({"debounce": "5"}, "debounce must be a number of seconds"),
        ({"state": ["x"]}, "state must be a dict"),
    ],
)
async def test_start_options__bad_ones_are_refused_and_change_nothing(h, options, message):
    client = h.client(registry(), "report")
    with pytest.raises(BadInput, match=message):
        await client.aget_or_create(["k"], **options)
    with pytest.raises(Exception, match="no report run"):
        await client.aget(["k"])


async def test_testing_helper__fires_what_is_due_at_the_clocks_time(h):
    reg = registry(schedule("*/5 * * * *", "report"))
    assert await afire_schedules(reg, clock=h.clock, store=h.store) == 0  # synced: next fire ahead
    h.clock.set(h.store.list_schedules()[0].next_fire_at)
    assert await afire_schedules(reg, clock=h.clock, store=h.store) == 1
    await arun_until_idle(reg, store=h.store, clock=h.clock, advance=False)
    [run] = report_runs(h)
    assert h.store.get_run(run.id).status == "completed"
