"""`operations.fork_run`: a new run from another run's history up to entry N. The entries before N
are copied (nested scopes, attempts and consumed messages included), N and after run fresh (N
with an edited input when given); the original is untouched; the fork has its own key (chosen or
derived) and its own idempotency keys. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from workflows import (
    EntryNotFound,
    KeyTaken,
    NotApplicable,
    RunNotFound,
    conf,
    operations,
    queue,
    setup,
    workflow,
)
from workflows.core.idempotency import step_idempotency_key
from workflows.models import Attempt, AuditEntry, Entry, Message, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db

RAN: list[dict] = []  # every step attempt that ran: run, step, input, idempotency key
FAIL_ONCE: set[str] = set()  # steps whose next attempt fails (one retry each)
HEARD: list = []


def record(step):
    if step.name in FAIL_ONCE:
        FAIL_ONCE.discard(step.name)
        raise RuntimeError("flaky")
    RAN.append({"run": step.run_id, "step": step.name, "input": step.input, "key": step.idempotency_key})
    step.state[step.name] = step.input
    return {"step": step.name, "input": step.input}


async def body(ctx):
    start = await ctx.queue.next("wait-start", names=["start"])
    a = await ctx.step("a", record, input=start.body, retry_backoff_base=0.0)
    both = await ctx.join(
        "both",
        {
            "x": lambda c: c.step("x", record, input="x"),
            "y": lambda c: c.step("y", record, input="y"),
        },
    )
    b = await ctx.step("b", record, input={"a": a["input"]})
    await ctx.queue.next("gate", names=["go"])
    c = await ctx.step("c", record, input=sorted(both))
    return [a["input"], b["input"], c["input"]]


ORDER = ["a", "x", "y", "b", "c"]


def on_repair(c, repair):
    """Forget what the step forked from and the later ones wrote (the state before N)."""
    HEARD.append(repair)
    if repair.action == "fork":
        for name in ORDER[ORDER.index(repair.step) :] if repair.step in ORDER else []:
            c.state.pop(name, None)


REGISTRY = setup(use={"wf": workflow(body, queues={"start": queue(), "go": queue()}, on_repair=on_repair)})


@pytest.fixture(autouse=True)
def registry(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.integration.test_fork.REGISTRY"]}
    conf.registry.cache_clear()
    RAN.clear()
    HEARD.clear()
    FAIL_ONCE.clear()
    yield
    conf.registry.cache_clear()


def started(key: str = "k", *, go: bool = True) -> Run:
    """A run of `wf` taken as far as it goes: completed (`go`), else waiting at the gate."""
    handle = REGISTRY.client("wf").get_or_create([key])
    handle.send("start", {"n": 1})
    if go:
        handle.send("go", None)
    FAIL_ONCE.add("a")  # the original's "a" takes two attempts: the fork copies both
    run_until_idle(REGISTRY)
    return Run.objects.get(id=handle.run_id)


def entry(run: Run, name: str) -> Entry:
    return Entry.objects.get(run=run, name=name, superseded=False)


def snapshot(run: Run) -> tuple:
    run.refresh_from_db()
    entries = list(
        Entry.objects.filter(run=run)
        .order_by("id")
        .values_list("id", "name", "status", "output", "superseded")
    )
    messages = list(
        Message.objects.filter(run=run).order_by("id").values_list("id", "consumed_by_id", "completed_at")
    )
    return run.status, run.state, run.result, run.epoch, run.updated_at, entries, messages


def test_a_fork_copies_the_entries_before_n_and_runs_n_and_after_fresh():
    original = started()
    assert original.status == "completed"
    before = snapshot(original)
    RAN.clear()

    fork = operations.fork_run(str(original.id), entry(original, "b").id, actor="ops", reason="try b again")

    assert (fork.workflow, fork.version, fork.status) == (original.workflow, original.version, "pending")
    assert fork.forked_from_id == original.id and fork.forked_from_entry == entry(original, "b").id
    copied = {(e.scope, e.name) for e in Entry.objects.filter(run=fork)}
    assert copied == {("", "wait-start"), ("", "a"), ("", "both"), ("/both.x", "x"), ("/both.y", "y")}
    # The original's state, less what on_repair forgot ("b" and on): the state as before "b".
    assert original.state.keys() == {"a", "x", "y", "b", "c"} and fork.state == {
        "a": {"n": 1},
        "x": "x",
        "y": "y",
    }
    assert Attempt.objects.filter(entry=entry(fork, "a")).count() == 2  # the failed attempt too
    [message] = Message.objects.filter(run=fork)  # the start message the copied wait consumed
    assert message.consumed_by_id == entry(fork, "wait-start").id and message.completed_at is not None
    assert entry(fork, "wait-start").output["messages"][0]["id"] == message.id

    run_until_idle(REGISTRY)  # the fork waits at its gate: its queues start empty
    assert Run.objects.get(id=fork.id).status == "waiting"
    REGISTRY.client("wf").get(["k~fork-1"]).send("go", None)
    run_until_idle(REGISTRY)

    fork.refresh_from_db()
    assert fork.status == "completed" and fork.result == [{"n": 1}, {"a": {"n": 1}}, ["x", "y"]]
    assert [r["step"] for r in RAN] == ["b", "c"] and {r["run"] for r in RAN} == {str(fork.id)}
    assert snapshot(original) == before  # the original is untouched
    assert [a.details["fork"] for a in AuditEntry.objects.filter(run=original, action="fork")] == [
        str(fork.id)
    ]
    [audit] = AuditEntry.objects.filter(run=fork, action="fork")
    assert (audit.actor, audit.reason, audit.details["forked_from"]) == (
        "ops",
        "try b again",
        str(original.id),
    )
    assert [(h.action, h.step) for h in HEARD] == [("fork", "b")]


def test_the_steps_that_run_in_a_fork_get_idempotency_keys_of_their_own():
    original = started()
    keys = {r["step"]: r["key"] for r in RAN}
    RAN.clear()
    fork = operations.fork_run(str(original.id), entry(original, "a").id, actor="ops")
    REGISTRY.client("wf").get(list(fork.key)).send("go", None)
    run_until_idle(REGISTRY)

    forked = {r["step"]: r["key"] for r in RAN if r["run"] == str(fork.id)}
    assert set(forked) == set(ORDER)
    assert all(forked[name] != keys[name] for name in ORDER)
    assert forked["b"] == step_idempotency_key(str(fork.id), 0, "", "b")  # derived from the fork's id


def test_an_edited_input_is_what_the_forked_step_runs_with():
    original = started()
    RAN.clear()
    fork = operations.fork_run(
        str(original.id), entry(original, "b").id, actor="ops", input={"a": "edited"}, edit_input=True
    )
    REGISTRY.client("wf").get(list(fork.key)).send("go", None)
    run_until_idle(REGISTRY)

    assert [r["input"] for r in RAN if r["step"] == "b"] == [{"a": "edited"}]
    assert Run.objects.get(id=fork.id).result[1] == {"a": "edited"}
    assert entry(original, "b").input == {"a": {"n": 1}}
    assert AuditEntry.objects.get(run=fork, action="fork").details["input"] == {"a": "edited"}


def test_keys_derived_chosen_and_taken():
    original = started()
    b = entry(original, "b").id
    first = operations.fork_run(str(original.id), b, actor="ops")
    second = operations.fork_run(str(original.id), b, actor="ops")
    chosen = operations.fork_run(str(original.id), b, actor="ops", key=["mine"])
    assert [first.key, second.key, chosen.key] == [["k~fork-1"], ["k~fork-2"], ["mine"]]
    assert set(original.forks.values_list("id", flat=True)) == {first.id, second.id, chosen.id}

    runs = Run.objects.count()
    with pytest.raises(KeyTaken) as taken:
        operations.fork_run(str(original.id), b, actor="ops", key=["k"])
    assert taken.value.detail == {"workflow": "wf", "key": ["k"], "runId": str(original.id)}
    assert Run.objects.count() == runs
    assert AuditEntry.objects.filter(run=original, action="fork").count() == 3  # not the refused one


def test_a_missing_entry_or_run_is_not_found():
    original = started()
    other = started("other")
    with pytest.raises(EntryNotFound):
        operations.fork_run(str(original.id), 10**9, actor="ops")
    with pytest.raises(EntryNotFound):  # an entry of another run
        operations.fork_run(str(original.id), entry(other, "b").id, actor="ops")
    with pytest.raises(RunNotFound):
        operations.fork_run("0190d9c4-0000-7000-8000-000000000000", entry(original, "b").id, actor="ops")


def test_a_fork_from_a_nested_or_superseded_entry_does_not_apply_and_changes_nothing():
    original = started()
    runs = Run.objects.count()
    with pytest.raises(NotApplicable, match="“both”, the root entry it belongs to") as nested:
        operations.fork_run(str(original.id), entry(original, "x").id, actor="ops")
    assert nested.value.detail == {"action": "fork", "runId": str(original.id), "status": "completed"}

    old_b = entry(original, "b")
    operations.replay_from(str(original.id), old_b.id, actor="ops")
    with pytest.raises(NotApplicable, match="superseded"):
        operations.fork_run(str(original.id), old_b.id, actor="ops")
    assert Run.objects.count() == runs
    assert not AuditEntry.objects.filter(action="fork").exists()


def test_a_fork_past_an_unfinished_entry_does_not_apply():
    original = started(go=False)
    # An entry before the fork point still in progress (a root step run concurrently, a child run
    # still going) belongs to the original: the fork refuses rather than copy it.
    Entry.objects.filter(id=entry(original, "a").id).update(status="waiting")
    with pytest.raises(NotApplicable, match="“a”, an entry before it, is waiting"):
        operations.fork_run(str(original.id), entry(original, "b").id, actor="ops")


def test_a_waiting_original_can_be_forked_and_goes_on_by_itself():
    original = started(go=False)
    assert original.status == "waiting"
    before = snapshot(original)
    fork = operations.fork_run(str(original.id), entry(original, "gate").id, actor="ops")
    assert snapshot(original) == before
    REGISTRY.client("wf").get(list(fork.key)).send("go", None)
    run_until_idle(REGISTRY)
    assert Run.objects.get(id=fork.id).status == "completed"
    assert Run.objects.get(id=original.id).status == "waiting"
    assert [r["step"] for r in RAN if r["run"] == str(fork.id)] == ["c"]
