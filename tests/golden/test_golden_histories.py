"""Golden histories replayed against the current code (as Temporal's replayer tests do): one must
replay cleanly, one recorded by older code must be reported as diverged, naming both sides."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from workflows.core.records import EntryRecord, RunRecord
from workflows.engine.replayer import check_history

from .flows import registry

HERE = Path(__file__).parent


def load(name: str) -> tuple[RunRecord, list[EntryRecord]]:
    data = json.loads((HERE / name).read_text())
    run = RunRecord(
        id=name,
        workflow=data["workflow"],
        key=data["key"],
        version="golden",
        status="waiting",
        state=data["state"],
    )
    entries = []
    for i, e in enumerate(data["entries"]):
        for field in ("started_at", "finished_at", "wake_at"):
            if e.get(field):
                e[field] = dt.datetime.fromisoformat(e[field])
        entries.append(EntryRecord(id=i + 1, **e))
    return run, entries


async def test_golden__current_history_replays_cleanly_to_its_wait():
    run, entries = load("brief_waiting_approval.json")
    report = await check_history(run, entries, registry)
    assert not report.diverged, report.detail
    assert "wait-approval" in report.detail  # it got through the join and the loop to the frontier


async def test_golden__history_of_older_code_is_reported_diverged():
    run, entries = load("brief_old_step_name.json")
    report = await check_history(run, entries, registry)
    assert report.diverged
    assert "'extract'" in report.detail and "'extract-companies'" in report.detail


async def test_golden__a_workflow_missing_from_the_code_is_reported():
    run, entries = load("brief_waiting_approval.json")
    run = RunRecord(**{**run.__dict__, "workflow": "gone"})
    report = await check_history(run, entries, registry)
    assert report.diverged and "gone" in report.detail


async def test_golden__dry_run_stops_before_any_step_would_run(monkeypatch):
    from . import flows

    calls = []
    monkeypatch.setattr(flows, "_lookup", lambda step: calls.append(step.input))
    run, entries = load("brief_waiting_approval.json")
    trimmed = [e for e in entries if e.scope == "" and e.position < 2]  # as if it crashed after extract
    report = await check_history(run, trimmed, registry)
    assert not report.diverged and "enrich-" in report.detail
    assert calls == []


@pytest.mark.django_db
def test_checkreplay_command__lists_diverging_runs(settings, capsys):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from workflows import conf, queue, setup, workflow
    from workflows.engine.client import WorkflowClient
    from workflows.storage.django import DjangoStore
    from workflows.testing import run_until_idle

    async def v1(ctx):
        await ctx.step("extract-companies", lambda s: 1)
        await ctx.queue.next("wait", names=["go"])

    old = setup(use={"brief": workflow(v1, queues={"go": queue()})})
    client = WorkflowClient(old, "brief", store=DjangoStore())
    stale = client.get_or_create(["old-run"])
    run_until_idle(old)
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.golden.flows.registry"]}
    conf.registry.cache_clear()
    try:
        with pytest.raises(CommandError):
            call_command("checkreplay")
        out = capsys.readouterr().out
        assert f"DIVERGED brief {stale.run_id}" in out and "1 run(s) checked, 1 would diverge" in out
    finally:
        conf.registry.cache_clear()


def _entry(i, scope, position, name, kind="step", status="completed", output=None):
    return EntryRecord(
        id=i, scope=scope, position=position, name=name, kind=kind, status=status, output=output
    )


async def test_check__a_branch_diverging_beside_a_branch_at_its_frontier_is_reported():
    from workflows import setup, workflow

    async def body(ctx):
        async def a(c):
            await c.step("a1", lambda s: 1)
            return await c.step("a2", lambda s: 2)

        async def b(c):
            return await c.step("b-new", lambda s: 3)

        return await ctx.join("fan", {"a": a, "b": b})

    registry = setup(use={"fan": workflow(body)})
    run = RunRecord(id="r", workflow="fan", key=["k"], version="x", status="waiting", state={})
    history = [_entry(1, "/fan.a", 0, "a1", output=1), _entry(2, "/fan.b", 0, "b-old", output=3)]
    report = await check_history(run, history, registry)
    assert report.diverged and "'b-new'" in report.detail and "'b-old'" in report.detail
    clean = [_entry(1, "/fan.a", 0, "a1", output=1), _entry(2, "/fan.b", 0, "b-new", output=3)]
    assert not (await check_history(run, clean, registry)).diverged
