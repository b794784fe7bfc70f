"""Pause and resume: a run (`operations.pause_run` / `resume_run`) and a whole workflow
(`pause_workflow` / `resume_workflow`). A paused run holds no lease and is claimed by no runner; a
due time that passed while it was paused fires at once on resume; a paused workflow's runs are not
claimed. On SQLite and PostgreSQL (a running run's pause: tests/acceptance/test_pause_process.py)."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.support import wait_for
from workflows import NotApplicable, RunNotFound, conf, operations, queue, setup, workflow
from workflows.models import AuditEntry, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db

RAN: list[str] = []


def record(step):
    RAN.append(step.name)
    return step.name


async def gated(ctx):
    await ctx.step("a", record)
    await ctx.queue.next("gate", names=["go"])
    return await ctx.step("b", record)


async def napping(ctx):
    await ctx.step("a", record)
    await ctx.sleep("nap", 0.3)
    return await ctx.step("b", record)


FLAKY: list[bool] = []  # True: step "call" fails


def call(step):
    RAN.append(step.name)
    if FLAKY and FLAKY[0]:
        raise RuntimeError("vendor down")
    return "ok"


async def calling(ctx):
    await ctx.step("a", record)
    return await ctx.step("call", call, max_retries=1, retry_backoff_base=0.0)


async def calling_fail(ctx):
    await ctx.step("a", record)
    return await ctx.step("call", call, max_retries=1, retry_backoff_base=0.0, on_exhausted="fail")


REGISTRY = setup(
    use={
        "gated": workflow(gated, queues={"go": queue()}),
        "napping": workflow(napping),
        "calling": workflow(calling, on_exhausted="pause"),
        "calling_fail": workflow(calling_fail, on_exhausted="pause"),
    },
)


@pytest.fixture(autouse=True)
def registry(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.integration.test_pause.REGISTRY"]}
    conf.registry.cache_clear()
    RAN.clear()
    FLAKY[:] = [True]
    yield
    conf.registry.cache_clear()


def start(name: str, key: str = "k") -> str:
    return REGISTRY.client(name).get_or_create([key]).run_id


def db_now():
    return conf.default_store().shared_clock.now()


def audit(run_id: str) -> list[tuple[str, str, str]]:
    rows = AuditEntry.objects.filter(run_id=run_id).order_by("id")
    return [(a.action, a.actor, a.reason) for a in rows]


def test_a_waiting_run_paused_is_not_claimed_until_resumed_and_a_message_sent_meanwhile_is_read():
    run_id = start("gated")
    run_until_idle(REGISTRY)
    assert Run.objects.get(id=run_id).status == "waiting"

    run = operations.pause_run(run_id, actor="ops", reason="vendor down")
    assert (run.status, run.wake_at, run.lease_owner) == ("paused", None, "")
    REGISTRY.client("gated").get(["k"]).send("go", None)  # arrives while paused
    run_until_idle(REGISTRY)
    assert Run.objects.get(id=run_id).status == "paused" and RAN == ["a"]

    run = operations.resume_run(run_id, actor="ops", reason="vendor back")
    assert run.status == "waiting" and run.wake_at is not None and run.paused_due_at is None
    run_until_idle(REGISTRY)
    run = Run.objects.get(id=run_id)
    assert run.status == "completed" and RAN == ["a", "b"]
    assert audit(run_id) == [("pause", "ops", "vendor down"), ("resume", "ops", "vendor back")]


def test_a_sleep_that_fell_due_while_paused_fires_right_after_resume():
    run_id = start("napping")
    run_until_idle(REGISTRY, advance=False)
    run = Run.objects.get(id=run_id)
    assert run.status == "waiting" and run.wake_at is not None
    due = run.wake_at

    run = operations.pause_run(run_id, actor="ops")
    assert run.paused_due_at == due and run.wake_at is None
    wait_for(lambda: db_now() > due, what="the sleep to fall due while paused")
    run_until_idle(REGISTRY, advance=False)
    assert Run.objects.get(id=run_id).status == "paused" and RAN == ["a"]  # not claimed, though due

    run = operations.resume_run(run_id, actor="ops")
    assert run.wake_at <= db_now()  # due at once: its time passed while it was paused
    run_until_idle(REGISTRY, advance=False)
    assert Run.objects.get(id=run_id).status == "completed" and RAN == ["a", "b"]


def test_a_sleep_not_yet_due_keeps_its_due_time_on_resume():
    run_id = start("napping")
    run_until_idle(REGISTRY, advance=False)
    due = Run.objects.get(id=run_id).wake_at
    operations.pause_run(run_id, actor="ops")
    if db_now() < due:  # a slow machine may pass it: the other test covers that case
        assert operations.resume_run(run_id, actor="ops").wake_at == due


def test_a_new_run_never_claimed_is_paused_and_resumed_pending():
    run_id = start("napping")
    assert operations.pause_run(run_id, actor="ops").status == "paused"
    run_until_idle(REGISTRY)
    assert RAN == []
    assert operations.resume_run(run_id, actor="ops").status == "pending"
    run_until_idle(REGISTRY)
    assert Run.objects.get(id=run_id).status == "completed"


def test_a_paused_workflow_has_none_of_its_runs_claimed_until_resumed():
    operations.pause_workflow("napping", actor="ops", reason="deploy")
    run_id = start("napping")
    other = start("gated")
    run_until_idle(REGISTRY)
    assert Run.objects.get(id=run_id).status == "pending"  # not claimed
    assert Run.objects.get(id=other).status == "waiting"  # another workflow runs on
    [paused] = operations.paused_workflows()
    assert (paused.workflow, paused.actor, paused.reason, paused.paused_runs) == (
        "napping",
        "ops",
        "deploy",
        0,
    )
    assert audit(run_id) == []  # started after the pause: its log has nothing of it

    operations.resume_workflow("napping", actor="ops", reason="done")
    assert operations.paused_workflows() == []
    run_until_idle(REGISTRY)
    assert Run.objects.get(id=run_id).status == "completed"
    assert audit(run_id) == [("resume_workflow", "ops", "done")]  # written on its unfinished runs


def test_the_next_wake_skips_paused_runs_and_paused_workflows():
    store = conf.default_store()
    run_id = start("napping")
    assert store.next_wake_at(owner="me", workflows=["napping"]) is not None
    operations.pause_workflow("napping", actor="ops")
    assert store.next_wake_at(owner="me", workflows=["napping"]) is None
    operations.resume_workflow("napping", actor="ops")
    operations.pause_run(run_id, actor="ops")
    assert store.next_wake_at(owner="me", workflows=["napping"]) is None


def test_a_paused_run_can_be_cancelled_and_ends_cancelled():
    run_id = start("gated")
    run_until_idle(REGISTRY)
    operations.pause_run(run_id, actor="ops")
    operations.cancel(run_id, actor="ops")
    run_until_idle(REGISTRY)
    assert Run.objects.get(id=run_id).status == "cancelled"


def test_pause_and_resume_refuse_what_does_not_apply_and_write_nothing():
    run_id = start("napping")
    with pytest.raises(NotApplicable, match="not paused"):
        operations.resume_run(run_id, actor="ops")
    operations.pause_run(run_id, actor="ops")
    with pytest.raises(NotApplicable, match="already paused"):
        operations.pause_run(run_id, actor="ops")
    operations.resume_run(run_id, actor="ops")
    run_until_idle(REGISTRY)
    with pytest.raises(NotApplicable, match="completed run"):
        operations.pause_run(run_id, actor="ops")
    assert [a for a, _, _ in audit(run_id)] == ["pause", "resume"]
    with pytest.raises(RunNotFound):
        operations.pause_run("00000000-0000-0000-0000-000000000000", actor="ops")
    operations.pause_workflow("gated", actor="ops")
    with pytest.raises(NotApplicable, match="already paused"):
        operations.pause_workflow("gated", actor="ops")
    operations.resume_workflow("gated", actor="ops")
    with pytest.raises(NotApplicable, match="not paused"):
        operations.resume_workflow("gated", actor="ops")


def test_a_running_run_is_asked_and_a_commit_hands_it_back_paused():
    """The store's side of a running run's pause (a real runner: test_pause_process.py): asked,
    the next commit reports `hold`, and the commit that hands it back leaves it paused."""
    from workflows.core.records import Commit, Transition

    store = conf.default_store()
    run_id = start("napping")
    [claimed] = store.claim(owner="me", workflows=["napping"], limit=1, lease_seconds=30, now=db_now())
    run = operations.pause_run(run_id, actor="ops")
    assert run.status == "running" and run.pause_requested
    assert store.commit(run_id=run_id, owner="me", commit=Commit(), now=db_now()).hold
    now = db_now()
    store.commit(
        run_id=run_id,
        owner="me",
        commit=Commit(transition=Transition(status="pending", wake_at=now)),
        now=now,
    )
    run = Run.objects.get(id=run_id)
    assert (run.status, run.wake_at, run.paused_due_at, run.lease_owner) == ("paused", None, now, "")
    assert not run.pause_requested and claimed.id == run_id
    assert connection.vendor in ("sqlite", "postgresql")


def test_on_exhausted_pause_holds_the_run_for_an_operator_and_resume_tries_the_step_again():
    run_id = start("calling")
    run_until_idle(REGISTRY)
    run = Run.objects.get(id=run_id)
    assert run.status == "paused" and run.wake_at is None and RAN == ["a", "call", "call"]
    step = run.entries.get(name="call")
    assert step.status == "retrying" and step.error["kind"] == "exhausted" and step.error["paused"]
    assert step.error["message"] == "vendor down"

    operations.resume_run(run_id, actor="ops")  # still failing: one more attempt, paused again
    run_until_idle(REGISTRY)
    assert Run.objects.get(id=run_id).status == "paused" and RAN.count("call") == 3

    FLAKY[:] = [False]  # fixed: retry now runs it at once and the run goes on
    operations.retry_now(run_id, step.id, actor="ops", reason="vendor back")
    run_until_idle(REGISTRY)
    run = Run.objects.get(id=run_id)
    assert run.status == "completed" and run.result == "ok" and RAN.count("call") == 4


def test_a_steps_own_on_exhausted_overrides_the_workflows():
    run_id = start("calling_fail")
    run_until_idle(REGISTRY)
    assert Run.objects.get(id=run_id).status == "failed"


def test_on_exhausted_takes_fail_or_pause_only():
    with pytest.raises(ValueError, match="on_exhausted"):
        workflow(calling, on_exhausted="stop")
