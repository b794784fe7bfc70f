"""A runner knows when it may have lost its runs: before a step body starts it checks, on a clock
that counts while the process is stopped, that the run's lease was renewed less than a lease ago.
A runner that was paused or cut off past its lease starts nothing more for the run and hands it
back if it is still its own."""

from __future__ import annotations

import asyncio
import logging

from workflows import setup, workflow
from workflows.engine.client import WorkflowClient
from workflows.engine.leases import LeaseWatch
from workflows.engine.runner import Runner
from workflows.storage.django import DjangoStore

LEASE = 5.0


class Ticks:
    """A stand-in for the boot clock that a test moves: a 'pause' of the process."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_lease_is_held_until_a_lease_less_its_safety_after_its_renewal():
    ticks = Ticks()
    watch = LeaseWatch(LEASE, clock=ticks)
    assert not watch.held("r")  # never renewed here: nothing vouches for it
    watch.renewed(["r"], watch.now())
    ticks.t += LEASE - watch.safety - 0.01
    assert watch.held("r")
    ticks.t += 0.02
    assert not watch.held("r")
    watch.renewed(["r"], ticks.t - 100)  # an older renewal never moves it back
    assert not watch.held("r")
    watch.renewed(["r"], ticks.t)
    assert watch.held("r")
    watch.forget("r")
    assert watch.age("r") is None
    assert LeaseWatch(LEASE, enabled=False, clock=ticks).held("never")  # switched off


def flows(ticks: Ticks, ledger: list[str]):
    async def frozen(step):
        ledger.append("one")
        ticks.t += LEASE + 1  # the process was stopped past its lease while in this step
        return 1

    async def body(ctx):
        await ctx.step("one", frozen)
        await ctx.step("two", lambda s: ledger.append("two") or 2)
        return "done"

    return setup(use={"wf": workflow(body)})


async def run_frozen(
    store: DjangoStore, stall_check: bool, caplog
) -> tuple[list[str], DjangoStore, str, int]:
    ticks, ledger = Ticks(), []
    registry = flows(ticks, ledger)
    handle = await WorkflowClient(registry, "wf", store=store).aget_or_create(["k"])
    runner = Runner(
        registry=registry, store=store, watch=False, lease_seconds=LEASE, heartbeat_seconds=60,
        stall_check=stall_check,
    )  # fmt: skip
    runner.leases._clock = ticks
    releases = 0
    release = store.release

    def counted_release(**kwargs):
        nonlocal releases
        releases += 1
        return release(**kwargs)

    store.release = counted_release
    with caplog.at_level(logging.WARNING):
        await asyncio.wait_for(runner.run(until_idle=True), 30)
    return ledger, store, handle.run_id, releases


async def test_a_runner_paused_past_its_lease_starts_no_more_steps_and_hands_the_run_back(
    django_store, caplog
):
    ledger, store, run_id, releases = await run_frozen(django_store, True, caplog)
    # Step one's body was already running when the process froze: its record lands (the lease
    # was still ours in the store). Step two never started in that execution: the run was handed
    # back and claimed again (a fresh lease), and then ran two once.
    assert ledger == ["one", "two"]
    assert "its lease may have lapsed" in caplog.text
    assert releases == 1
    run = store.get_run(run_id)
    assert (run.status, run.result) == ("completed", "done")
    assert [e.name for e in store.load_history(run_id)] == ["one", "two"]


async def test_without_the_check_the_paused_runner_goes_on_to_the_next_step(django_store, caplog):
    ledger, store, run_id, releases = await run_frozen(django_store, False, caplog)
    # It starts step two on a lease that may have lapsed: beside a runner that took the run over,
    # that is a side effect twice. (Here no other runner took it, so nothing else shows.)
    assert ledger == ["one", "two"] and releases == 0
    assert "its lease may have lapsed" not in caplog.text
    assert store.get_run(run_id).status == "completed"
