"""`step.idempotency_key`: stable across the attempts and crash-restarts of one recorded entry,
new for the entries an operator's replay runs again."""

from __future__ import annotations

from workflows import CriticalError, setup, workflow
from workflows.core.records import Audit

from .test_store_failures import Blink, quick_store_retries  # noqa: F401 - the fixture, used here too

WHO = Audit(actor="ops:ada", reason="the CMS is fixed")


def _two_calls(keys: dict[str, list[str]], fail: dict[str, int]):
    """`prepare` then `publish`; each notes the key it was given; `fail[name]` attempts fail first."""

    def call(name):
        async def body(step):
            keys.setdefault(name, []).append(step.idempotency_key)
            if fail.get(name, 0) > 0:
                fail[name] -= 1
                raise (CriticalError if fail.get("critical") else RuntimeError)(f"{name} failed")
            return name

        return body

    async def flow(ctx):
        await ctx.step("prepare", call("prepare"), retry_backoff_base=0.001)
        return await ctx.step("publish", call("publish"), retry_backoff_base=0.001)

    return setup(use={"wf": workflow(flow)})


async def test_the_same_key_for_every_attempt_and_after_a_store_failure(h):
    keys: dict[str, list[str]] = {}
    reg = _two_calls(keys, {"publish": 2})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    Blink(
        h.store,
        "commit",
        when=lambda kw: any(w.name == "publish" and w.output for w, _a in kw["commit"].entries),
    )
    await h.run(reg)

    assert (await handle.ainfo()).status == "completed"
    assert len(keys["publish"]) == 4  # two failed attempts, one whose record was lost, one recorded
    assert len(set(keys["publish"])) == 1
    assert keys["prepare"][0] != keys["publish"][0]  # one key per step


async def test_a_replay_gives_the_replayed_step_and_the_later_ones_new_keys(h):
    keys: dict[str, list[str]] = {}
    reg = _two_calls(keys, {"publish": 1, "critical": 1})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).status == "failed"

    h.store.replay(handle.run_id, h.entries(handle.run_id)["publish"].id, audit=WHO, now=h.clock.now())
    await h.run(reg)
    assert (await handle.ainfo()).status == "completed"
    assert keys["prepare"] == keys["prepare"][:1]  # recorded: not run again
    first, second = keys["publish"]
    assert first != second  # replayed: a new request to the CMS

    h.store.replay(handle.run_id, h.entries(handle.run_id)["prepare"].id, audit=WHO, now=h.clock.now())
    await h.run(reg)
    assert len(set(keys["prepare"])) == 2 and len(set(keys["publish"])) == 3  # the steps after it too


async def test_keys_differ_between_runs(h):
    keys: dict[str, list[str]] = {}
    reg = _two_calls(keys, {})
    for key in ("a", "b"):
        await h.client(reg, "wf").aget_or_create([key])
    await h.run(reg)
    assert len(set(keys["publish"])) == 2
