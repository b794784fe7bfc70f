"""Concurrency groups and priority: the declaration and the store's claim semantics (at most `max`
runs of a group execute at once; higher priority first, FIFO within one). Over the real store on
the test database (tests/harness.py)."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from workflows import Concurrency, queue, setup, workflow
from workflows.core.concurrency import check_priority
from workflows.core.exceptions import BadInput, RunNotFound
from workflows.core.records import Commit, RunStatus, Transition
from workflows.engine.runner import Runner
from workflows.testing import arun_until_idle

LEASE = 30.0


async def _noop(ctx):
    return "ok"


def _grouped(max_: int = 2, key=lambda run: run.key[0], body=_noop):
    return setup(use={"wf": workflow(body, concurrency=Concurrency(max=max_, key=key))})


def _claim(h, reg, owner="r1", limit=10, now=None):
    return h.store.claim(
        owner=owner,
        workflows=reg.names(),
        limit=limit,
        lease_seconds=LEASE,
        now=now or h.clock.now(),
        concurrency=reg.concurrency_caps(),
    )


# --- the declaration --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "2", None])
def test_concurrency__max_must_be_a_whole_number_of_at_least_one(bad):
    with pytest.raises(BadInput, match="max"):
        Concurrency(max=bad)


def test_concurrency__key_must_be_a_function():
    with pytest.raises(BadInput, match="function of the run"):
        Concurrency(max=1, key="customer")


def test_concurrency__only_a_concurrency_declaration_is_accepted():
    with pytest.raises(TypeError, match="Concurrency"):
        workflow(_noop, concurrency=3)


@pytest.mark.parametrize("good", [-100, -1, 0, 7, 100])
def test_check_priority__accepts_minus_100_to_100(good):
    assert check_priority(good) == good


@pytest.mark.parametrize("bad", [101, -101, True, 1.5, "5", None])
def test_check_priority__refuses_anything_else_clearly(bad):
    with pytest.raises(BadInput, match="priority must be a whole number from -100 to 100"):
        check_priority(bad)


def test_group__named_after_the_workflow_and_the_key_function():
    assert Concurrency(max=1).group("wf", ["a", "b"]) == "wf"
    assert Concurrency(max=1, key=lambda run: run.key[1]).group("wf", ["a", "b"]) == "wf/b"
    assert Concurrency(max=1, key=lambda run: len(run.key)).group("wf", ["a", "b"]) == "wf/2"


@pytest.mark.parametrize("key", [lambda run: run.key[5], lambda run: None, lambda run: "", lambda run: ["x"]])
def test_group__a_failing_key_function_is_a_clear_error(key):
    with pytest.raises(BadInput, match="concurrency key function"):
        Concurrency(max=1, key=key).group("wf", ["a"])


# --- starting -----------------------------------------------------------------------------------------


async def test_start__stores_the_group_and_priority_of_a_new_run(h):
    reg = _grouped()
    handle = await h.client(reg, "wf").aget_or_create(["acme", "1"], priority=7)
    run = await h.store.aget_run(handle.run_id)
    assert (run.concurrency_group, run.priority) == ("wf/acme", 7)
    plain = setup(use={"p": workflow(_noop)})
    other = await h.store.aget_run((await h.client(plain, "p").aget_or_create(["x"])).run_id)
    assert (other.concurrency_group, other.priority) == (None, 0)


async def test_start__a_failing_key_function_refuses_the_start_and_creates_nothing(h):
    reg = _grouped(key=lambda run: run.key[3])
    client = h.client(reg, "wf")
    with pytest.raises(BadInput, match="concurrency key function failed for key"):
        await client.aget_or_create(["acme"])
    with pytest.raises(RunNotFound):
        await client.aget(["acme"])


async def test_start__a_bad_priority_is_refused_before_anything_is_written(h):
    client = h.client(_grouped(), "wf")
    with pytest.raises(BadInput, match="priority"):
        await client.aget_or_create(["acme"], priority=1000)
    with pytest.raises(RunNotFound):
        await client.aget(["acme"])


async def test_start_options__debounce_and_replace_keep_group_and_priority(h):
    client = h.client(_grouped(), "wf")
    debounced = await client.aget_or_create(["acme"], debounce=5, priority=3)
    replaced = await client.aget_or_create(["beta"], on_conflict="replace", priority=-2)
    for handle, expected in ((debounced, ("wf/acme", 3)), (replaced, ("wf/beta", -2))):
        run = await h.store.aget_run(handle.run_id)
        assert (run.concurrency_group, run.priority) == expected


# --- claims -------------------------------------------------------------------------------------------


async def test_claim__never_more_than_max_of_a_group_at_once(h):
    reg = _grouped(max_=2)
    client = h.client(reg, "wf")
    for i in range(5):
        await client.aget_or_create(["acme", str(i)])
    for i in range(3):
        await client.aget_or_create(["beta", str(i)])
    first = _claim(h, reg, "r1")
    assert sorted(r.concurrency_group for r in first) == ["wf/acme", "wf/acme", "wf/beta", "wf/beta"]
    assert _claim(h, reg, "r2") == []  # every group is full: the others wait, holding nothing


async def test_claim__a_finished_run_frees_its_slot(h):
    reg = _grouped(max_=1, key=None)
    client = h.client(reg, "wf")
    for i in range(3):
        await client.aget_or_create([str(i)])
    await arun_until_idle(reg, store=h.store, clock=h.clock, concurrency=1)
    assert [(await h.store.afind_run("wf", [str(i)])).status for i in range(3)] == ["completed"] * 3


async def test_claim__a_crashed_runners_slot_frees_when_its_lease_lapses(h):
    reg = _grouped(max_=1, key=None)
    client = h.client(reg, "wf")
    for i in range(2):
        await client.aget_or_create([str(i)])
    [held] = _claim(h, reg, "crashed")
    assert _claim(h, reg, "r2") == []
    later = h.clock.now() + dt.timedelta(seconds=LEASE + 1)
    [taken] = _claim(h, reg, "r2", now=later)  # the crashed runner's run no longer counts
    assert taken.id != held.id or taken.taken_over
    assert _claim(h, reg, "r3", now=later) == []


async def test_claim__runs_of_other_groups_and_other_workflows_are_not_held_back(h):
    grouped = workflow(_noop, concurrency=Concurrency(max=1, key=lambda run: run.key[0]))
    reg = setup(use={"wf": grouped, "plain": workflow(_noop)})
    for i in range(3):
        await h.client(reg, "wf").aget_or_create(["acme", str(i)])
        await h.client(reg, "plain").aget_or_create([str(i)])
    await h.client(reg, "wf").aget_or_create(["beta", "0"])
    claimed = _claim(h, reg, limit=10)
    assert sorted(r.workflow for r in claimed) == ["plain"] * 3 + ["wf"] * 2
    assert {r.concurrency_group for r in claimed if r.workflow == "wf"} == {"wf/acme", "wf/beta"}


async def test_claim__a_group_whose_workflow_no_longer_limits_it_is_not_held_back(h):
    reg = _grouped(max_=1, key=None)
    for i in range(3):
        await h.client(reg, "wf").aget_or_create([str(i)])
    unlimited = setup(use={"wf": workflow(_noop)})  # new code dropped the limit: its claims decide
    assert len(_claim(h, unlimited)) == 3


async def test_next_wake_at__runs_held_in_a_full_group_are_not_due(h):
    reg = _grouped(max_=1, key=None)
    for i in range(3):
        await h.client(reg, "wf").aget_or_create([str(i)])
    [held] = _claim(h, reg, "r1")
    assert _claim(h, reg, "r2") == []  # a claim that finds the group full sets its runs aside
    caps = reg.concurrency_caps()
    # Another runner: the earliest it can do anything is the holder's lease expiry.
    assert await h.store.anext_wake_at(owner="r2", workflows=["wf"], concurrency=caps) == held.wake_at
    # The holder itself waits for its own run to end (no timer: its end wakes it).
    assert await h.store.anext_wake_at(owner="r1", workflows=["wf"], concurrency=caps) is None


async def test_concurrency_use__running_and_waiting_per_group(h):
    reg = _grouped(max_=2)
    client = h.client(reg, "wf")
    for i in range(5):
        await client.aget_or_create(["acme", str(i)])
    await client.aget_or_create(["beta", "0"])
    _claim(h, reg, "r1")
    uses = await h.store.aconcurrency_use(reg.concurrency_caps(), now=h.clock.now())
    assert [(u.group, u.running, u.max, u.waiting) for u in uses] == [
        ("wf/acme", 2, 2, 3),
        ("wf/beta", 1, 2, 0),
    ]


# --- priority -----------------------------------------------------------------------------------------


async def test_priority__higher_first_then_fifo_within_one(h):
    reg = setup(use={"p": workflow(_noop)})
    client = h.client(reg, "p")
    order = [("low", -5), ("a", 0), ("urgent", 50), ("b", 0), ("high", 10), ("c", 0)]
    for name, priority in order:
        await client.aget_or_create([name], priority=priority)
        h.clock.advance(1)
    claimed = [r.key[0] for r in _claim(h, reg, limit=10)]
    assert claimed == ["urgent", "high", "a", "b", "c", "low"]


async def test_priority__reorders_claims_one_at_a_time(h):
    reg = _grouped(max_=1, key=None)
    client = h.client(reg, "wf")
    for name, priority in [("first", 0), ("second", 0), ("vip", 9)]:
        await client.aget_or_create([name], priority=priority)
        h.clock.advance(1)
    started = []
    for _ in range(3):
        [run] = _claim(h, reg, limit=5)
        started.append(run.key[0])
        h.store.commit(run_id=run.id, owner="r1", commit=_done(), now=h.clock.now())
    assert started == ["vip", "first", "second"]


async def test_priority__a_message_sent_with_a_priority_gives_the_run_that_priority(h):
    reg = setup(use={"p": workflow(_noop, queues={"start": queue()})})
    handle = await h.client(reg, "p").aget_or_create(["x"])
    await handle.asend("start", {"go": 1}, priority=42)
    assert (await h.store.aget_run(handle.run_id)).priority == 42
    await handle.asend("start", {"go": 2})  # no priority: it keeps its own
    assert (await h.store.aget_run(handle.run_id)).priority == 42
    with pytest.raises(BadInput, match="priority"):
        await handle.asend("start", {}, priority=-101)


# --- the engine --------------------------------------------------------------------------------------


async def test_engine__a_group_never_executes_more_than_max_at_once(h):
    inside: dict[str, int] = {}
    peak: dict[str, int] = {}

    async def body(ctx):
        async def call(step):
            group = ctx.key[0]
            inside[group] = inside.get(group, 0) + 1
            peak[group] = max(peak.get(group, 0), inside[group])
            await asyncio.sleep(0.01)
            inside[group] -= 1
            return "ok"

        return await ctx.step("call", call)

    reg = _grouped(max_=2, body=body)
    client = h.client(reg, "wf")
    ids = [(await client.aget_or_create([g, str(i)])).run_id for g in ("acme", "beta") for i in range(6)]
    await arun_until_idle(reg, store=h.store, clock=h.clock, concurrency=10)
    assert [(await h.store.aget_run(rid)).status for rid in ids] == ["completed"] * len(ids)
    assert peak == {"acme": 2, "beta": 2}


async def test_engine__a_child_joins_its_workflows_group_at_its_parents_priority(h):
    child_wf = workflow(_noop, concurrency=Concurrency(max=1, key=lambda run: run.key[0]))

    async def parent(ctx):
        return await ctx.child("kid", "child", ["team", "1"])

    reg = setup(use={"parent": workflow(parent), "child": child_wf})
    await h.client(reg, "parent").aget_or_create(["p"], priority=4)
    await arun_until_idle(reg, store=h.store, clock=h.clock)
    child = await h.store.afind_run("child", ["team", "1"])
    assert (child.status, child.concurrency_group, child.priority) == ("completed", "child/team", 4)


def _done() -> Commit:
    return Commit(transition=Transition(status=RunStatus.COMPLETED, result="ok"))


async def test_claim__a_held_back_run_asked_to_cancel_ends_without_waiting_for_a_slot(h):
    reg = _grouped(max_=1, key=None)
    client = h.client(reg, "wf")
    for i in range(3):
        await client.aget_or_create([str(i)])
    [held] = _claim(h, reg, "r1")
    assert _claim(h, reg, "r2") == []
    # (runs started at one instant are claimed in id order: take one that is not running)
    waiting = await client.aget(["2" if held.key != ["2"] else "1"])
    await waiting.acancel()
    [taken] = _claim(h, reg, "r2")
    assert taken.id == waiting.run_id and taken.cancel_requested
    assert held.id != taken.id


# --- a deploy that raises max or removes concurrency ------------------------------------------------


def _peak_of(peak: list[int], max_: int | None):
    """The workflow at `max_` (None: no concurrency), recording the most runs inside at once."""
    inside = [0]

    async def body(ctx):
        async def call(step):
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
            await asyncio.sleep(0.02)
            inside[0] -= 1
            return "ok"

        return await ctx.step("call", call)

    if max_ is None:
        return setup(use={"wf": workflow(body)})
    return _grouped(max_=max_, key=None, body=body)


async def _set_aside_under_max_1(h, runs: int) -> list[str]:
    """`runs` runs of one group at max 1: one claimed and finished, the others set aside by a claim
    that found the group full (the finished one put back only one of them)."""
    old = _peak_of([0], 1)
    ids = [(await h.client(old, "wf").aget_or_create([str(i)])).run_id for i in range(runs)]
    [first] = _claim(h, old, "old")
    assert _claim(h, old, "old") == []  # the group is full: the others are set aside
    await h.store.acommit(run_id=first.id, owner="old", commit=_done(), now=h.clock.now())
    return ids


async def test_runner_start__a_raised_max_fills_at_once_with_the_runs_set_aside(h):
    ids = await _set_aside_under_max_1(h, 6)
    peak = [0]
    new = _peak_of(peak, 3)  # the deploy raised max to 3: its runners start
    await arun_until_idle(new, store=h.store, clock=h.clock, concurrency=10)
    assert peak == [3]  # not 1: the runs set aside did not wait for slots to free one by one
    assert [(await h.store.aget_run(rid)).status for rid in ids] == ["completed"] * 6


async def test_runner_start__with_concurrency_removed_every_run_set_aside_runs_at_once(h):
    ids = await _set_aside_under_max_1(h, 5)
    peak = [0]
    runner = Runner(registry=_peak_of(peak, None), store=h.store, clock=h.clock, concurrency=10, watch=False)
    await asyncio.wait_for(runner.run(until_idle=True), 20)
    assert peak == [4]  # the 4 left, at once: not drained one at a time
    assert [(await h.store.aget_run(rid)).status for rid in ids] == ["completed"] * 5


async def test_unpark_held__every_run_set_aside_is_claimable_again_and_the_next_claim_applies_the_new_max(h):
    old = _grouped(max_=1, key=None)
    for i in range(5):
        await h.client(old, "wf").aget_or_create([str(i)])
    [running] = _claim(h, old, "old")
    assert _claim(h, old, "old") == []
    await h.store.aunpark_held(["wf"])
    raised = _grouped(max_=3, key=None)
    assert len(_claim(h, raised, "new")) == 2  # 3 running with the old runner's one
    assert _claim(h, raised, "new") == []  # full again at the new max: the rest set aside again
    await h.store.aunpark_held(["wf"])
    unlimited = setup(use={"wf": workflow(_noop)})
    again = _claim(h, unlimited, "new")
    assert len(again) == 2 and running.id not in {r.id for r in again}  # every one left, at once
