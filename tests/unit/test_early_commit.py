"""A queue wait that takes its messages commits without the body waiting for it: the step after
the wait runs during the round trip. What must still hold: the records land in order, nothing
after a failed early commit is written (the run resumes from what landed and completes as
without the failure), a second wait never takes the first's messages again, and a wait that
carries a state change is committed before the body goes on."""

from __future__ import annotations

import pytest

from workflows import queue, setup, workflow
from workflows.core.exceptions import LeaseLost, StoreUnavailable
from workflows.engine import runner as runner_module
from workflows.models import Message


@pytest.fixture(autouse=True)
def quick_store_retries(monkeypatch):
    monkeypatch.setattr(runner_module, "STORE_RETRY_BASE", 0.01)


def _takes_messages(kwargs) -> bool:
    return any(w.kind == "queue" and w.consumes for w, _a in kwargs["commit"].entries)


def _watch_commits(store, seen: list[str], ran: list[str], fail=None) -> None:
    """Notes, at each commit of a wait that took messages, which steps had run by then; `fail`
    (an exception) is raised instead of the first such commit, before anything is written."""
    real = store.commit
    failed = []

    def commit(**kwargs):
        if _takes_messages(kwargs):
            seen.append(f"wait commit after {ran}")
            if fail is not None and not failed:
                failed.append(fail)
                raise fail
        return real(**kwargs)

    store.commit = commit


def _wait_then_step(ran: list[str], state_change: bool = False):
    async def body(ctx):
        if state_change:  # every execution: the resumed one changes it before its wait
            ctx.state["executions"] = ctx.state.get("executions", 0) + 1
        message = await ctx.queue.next("wait-go", names=["go"])

        async def act(step):
            ran.append("act")
            return message.body["n"] * 10

        return await ctx.step("act", act)

    return setup(use={"wf": workflow(body, queues={"go": queue()}, state=dict)})


async def test_the_step_after_a_wait_runs_while_the_wait_commits_and_both_land_in_order(h):
    ran: list[str] = []
    seen: list[str] = []
    reg = _wait_then_step(ran)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    _watch_commits(h.store, seen, ran)
    await handle.asend("go", {"n": 4})
    await h.run(reg)

    info = await handle.ainfo()
    assert (info.status, info.result) == ("completed", 40)
    assert seen == ["wait commit after ['act']"]  # the step ran before the wait's commit was written
    history = h.store.load_history(handle.run_id)
    assert [(e.name, e.position, e.status) for e in history] == [
        ("wait-go", 0, "completed"),
        ("act", 1, "completed"),
    ]
    [wait] = [e for e in history if e.name == "wait-go"]
    consumed = Message.objects.filter(consumed_at__isnull=False).values_list("consumed_by_id", flat=True)
    assert set(consumed) == {wait.id}


@pytest.mark.parametrize(
    "failure",
    [StoreUnavailable("the database failed"), LeaseLost("taken over")],
    ids=["unavailable", "lease"],
)
async def test_when_the_early_commit_fails_nothing_after_it_lands_and_the_run_completes_as_without(
    h, failure
):
    ran: list[str] = []
    seen: list[str] = []
    reg = _wait_then_step(ran)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    _watch_commits(h.store, seen, ran, fail=failure)
    await handle.asend("go", {"n": 2})
    if isinstance(failure, LeaseLost):  # the lease lapses, as a lost one does, and the run is claimed again
        await h.run(reg)
        h.clock.advance(60)
    await h.run(reg)

    info = await handle.ainfo()
    assert (info.status, info.result) == ("completed", 20)
    assert ran == ["act", "act"]  # ran during the failed commit, then again from the history
    history = h.store.load_history(handle.run_id)
    assert [(e.name, e.position) for e in history] == [("wait-go", 0), ("act", 1)]
    assert [a.outcome for a in h.attempts(handle.run_id, "act")] == ["ok"]


async def test_a_second_wait_never_takes_the_first_waits_messages(h):
    async def body(ctx):
        first = await ctx.queue.next("first", names=["go"])
        second = await ctx.queue.next("second", names=["go"])
        return [first.body, second.body]

    reg = setup(use={"wf": workflow(body, queues={"go": queue()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    await handle.asend("go", 1)
    await handle.asend("go", 2)
    await h.run(reg)

    info = await handle.ainfo()
    assert (info.status, info.result) == ("completed", [1, 2])


async def test_a_wait_that_carries_a_state_change_is_committed_before_the_body_goes_on(h):
    ran: list[str] = []
    seen: list[str] = []
    reg = _wait_then_step(ran, state_change=True)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    _watch_commits(h.store, seen, ran)
    await handle.asend("go", {"n": 1})
    await h.run(reg)

    info = await handle.ainfo()
    assert (info.status, info.result, info.state) == ("completed", 10, {"executions": 2})
    assert seen == ["wait commit after []"]


async def test_the_early_commit_never_carries_a_state_change_made_after_it(h):
    """The step after the wait changes the state and finishes before the wait's commit is sent (its
    body never suspends). That change belongs to the step's own commit: when that commit is lost,
    the step runs again from the state as it was, and counts once."""

    async def body(ctx):
        await ctx.queue.next("wait-go", names=["go"])

        async def count(step):
            step.state["count"] = step.state.get("count", 0) + 1
            return step.state["count"]

        return await ctx.step("count", count)

    reg = setup(use={"wf": workflow(body, queues={"go": queue()}, state=dict)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    real = h.store.commit
    failed = []

    def commit(**kwargs):
        if not failed and any(
            w.name == "count" and w.output is not None for w, _a in kwargs["commit"].entries
        ):
            failed.append(True)
            raise StoreUnavailable("the database failed")
        return real(**kwargs)

    h.store.commit = commit
    await handle.asend("go", None)
    await h.run(reg)

    info = await handle.ainfo()
    assert failed
    assert (info.status, info.result, info.state) == ("completed", 1, {"count": 1})
