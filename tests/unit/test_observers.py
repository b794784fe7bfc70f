"""The runner's observers see what was stored: each attempt once, replays never, a failing
observer never changes a run."""

from __future__ import annotations

from workflows import setup, workflow
from workflows.core.clock import FakeClock
from workflows.engine.observers import Observer
from workflows.telemetry.metrics import MetricsObserver
from workflows.testing import arun_until_idle


class Recorder(Observer):
    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def execution_started(self, run, *, owner, claimed_at):
        self.seen.append(("start", run.fresh))

    def committed(self, run, commit):
        for write, attempt in commit.entries:
            if attempt is not None:
                self.seen.append(("attempt", write.name, attempt.number, attempt.outcome))
        if commit.transition is not None:
            self.seen.append(("transition", commit.transition.status))

    def execution_ended(self, run, *, status, wake_at):
        self.seen.append(("end", status))


class Broken(Observer):
    def committed(self, run, commit):
        raise RuntimeError("observer bug")


async def test_observers__see_each_attempt_once_across_executions(h):
    async def flaky(step):
        if step.attempt == 1:
            raise RuntimeError("first fails")
        return step.attempt

    async def body(ctx):
        await ctx.step("a", lambda s: 1)
        return await ctx.step("b", flaky, retry_backoff_base=1.0)

    reg = setup(use={"wf": workflow(body)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    recorder = Recorder()
    await arun_until_idle(reg, store=h.store, clock=h.clock, observers=[Broken(), recorder])
    assert (await handle.ainfo()).status == "completed"
    assert recorder.seen == [
        ("start", True),
        ("attempt", "a", 1, "ok"),
        ("attempt", "b", 1, "error"),
        ("transition", "waiting"),
        ("end", "waiting"),
        ("start", False),  # the replay of "a" and of b's failed attempt is not seen again
        ("attempt", "b", 2, "ok"),
        ("transition", "completed"),
        ("end", "completed"),
    ]


async def test_a_claim_says_when_the_run_was_due(h):
    async def body(ctx):
        return None

    reg = setup(use={"wf": workflow(body)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    created = h.clock.now()
    h.clock.advance(2)
    (run,) = await h.store.aclaim(owner="me", workflows=["wf"], limit=1, lease_seconds=30, now=h.clock.now())
    assert run.id == handle.run_id
    assert run.due_at == created  # wake_at is the lease's expiry by now
    assert run.wake_at > h.clock.now()


def test_the_metrics_observer_measures_run_times_on_the_runners_clock():
    observer = MetricsObserver()
    clock = FakeClock()
    observer.attached(clock=clock)
    assert observer.clock is clock
    assert observer.step_label("w", "enrich-3") == "enrich-#"  # attaching keeps its own state whole
