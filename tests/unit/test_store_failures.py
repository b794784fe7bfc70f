"""A store that fails (connection lost, server restarting) is never a run's failure: the runner
abandons the execution as if it had crashed there and resumes the run when the store answers.
Here over the real store on the test database, its failures injected; the real outage
(pg_terminate_backend, a server restart) is in tests/acceptance/test_database_blinks.py."""

from __future__ import annotations

import pytest

from workflows import queue, setup, workflow
from workflows.core.exceptions import StoreUnavailable
from workflows.engine import runner as runner_module


@pytest.fixture(autouse=True)
def quick_store_retries(monkeypatch):
    monkeypatch.setattr(runner_module, "STORE_RETRY_BASE", 0.01)


class Blink:
    """Makes the store's `method` fail `times` times with StoreUnavailable, either before the
    call (nothing written) or after it (written, but the answer is lost); only the calls that
    `when(kwargs)` picks, when given."""

    def __init__(self, store, method: str, *, times: int = 1, landed: bool = False, when=None):
        self.failed = 0
        real = getattr(store, method)

        def call(*args, **kwargs):
            if self.failed < times and (when is None or when(kwargs)):
                self.failed += 1
                if landed:
                    real(*args, **kwargs)
                raise StoreUnavailable(
                    "the database failed: terminating connection due to administrator command"
                )
            return real(*args, **kwargs)

        setattr(store, method, call)  # the async twins look the method up on the instance


def _records(step: str):
    return lambda kwargs: any(w.name == step and w.output is not None for w, _a in kwargs["commit"].entries)


def _two_steps(ran: list[str]):
    async def body(ctx):
        async def first(step):
            ran.append("first")
            step.state["stage"] = "first done"
            return 1

        async def second(step):
            ran.append("second")
            return 2

        a = await ctx.step("first", first)
        b = await ctx.step("second", second)
        return a + b

    return setup(use={"wf": workflow(body, state=lambda: {"stage": "queued"})})


async def test_a_step_commit_that_never_landed_runs_the_step_again_and_the_run_completes(h):
    ran: list[str] = []
    reg = _two_steps(ran)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    blink = Blink(h.store, "commit", when=_records("first"))
    await h.run(reg)

    info = await handle.ainfo()
    assert blink.failed == 1
    assert (info.status, info.result, info.error) == ("completed", 3, None)
    assert ran == ["first", "first", "second"]  # the lost commit's step ran again, the next once
    assert info.state == {"stage": "first done"}
    assert [a.outcome for a in h.attempts(handle.run_id, "first")] == ["ok"]


async def test_a_commit_that_landed_but_lost_its_answer_is_not_run_again(h):
    ran: list[str] = []
    reg = _two_steps(ran)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    blink = Blink(h.store, "commit", landed=True, when=_records("first"))
    await h.run(reg)

    info = await handle.ainfo()
    assert blink.failed == 1
    assert (info.status, info.result) == ("completed", 3)
    assert ran == ["first", "second"]  # the history read again says `first` is recorded
    assert info.state == {"stage": "first done"}


async def test_every_commit_failing_once_still_ends_as_without_failures(h):
    ran: list[str] = []
    reg = _two_steps(ran)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    blink = Blink(h.store, "commit", times=3)  # first, second and the completion each fail once
    await h.run(reg)

    info = await handle.ainfo()
    assert blink.failed == 3
    assert (info.status, info.result) == ("completed", 3)


async def test_a_failed_read_of_the_history_or_of_messages_is_retried(h):
    async def body(ctx):
        msg = await ctx.queue.next("wait", names=["go"])
        return msg.body

    reg = setup(use={"wf": workflow(body, queues={"go": queue()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    reads = Blink(h.store, "available_messages")
    await h.run(reg)
    assert reads.failed == 1
    assert (await handle.ainfo()).status == "waiting"

    await handle.asend("go", {"n": 1})
    history = Blink(h.store, "load_resume")  # the history (with the messages, where read together)
    await h.run(reg)

    info = await handle.ainfo()
    assert history.failed == 1
    assert (info.status, info.result, info.error) == ("completed", {"n": 1}, None)
