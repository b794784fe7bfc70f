"""Structured activity logs (workflows.telemetry.logs): one line per run transition and per step
attempt on `workflows.activity`, with fields a JSON formatter writes as keys, never inputs,
outputs, state or error messages; and the project's LOGGING writes them as JSON lines when
WORKFLOWS_LOG_JSON=1."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from workflows import setup, workflow
from workflows.telemetry.logs import LOGGER, ActivityLogObserver
from workflows.testing import arun_until_idle

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-live-do-not-log"


def _flaky():
    async def body(ctx):
        async def flaky(step):
            step.state["token"] = SECRET
            if step.attempt == 1:
                raise ConnectionError(f"503 from the CRM, key {SECRET}")
            return {"echo": SECRET}

        return await ctx.step("enrich", flaky, input={"api_key": SECRET}, retry_backoff_base=1.5)

    return setup(use={"wf": workflow(body)})


def _lines(caplog):
    return [r for r in caplog.records if r.name == LOGGER]


async def test_one_line_per_transition_and_per_attempt__with_fields_and_no_secrets(h, caplog):
    reg = _flaky()
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    await arun_until_idle(reg, store=h.store, clock=h.clock, observers=[ActivityLogObserver()])
    assert (await handle.ainfo()).status == "completed"

    lines = _lines(caplog)
    assert [(r.event, getattr(r, "status", None) or getattr(r, "outcome", None)) for r in lines] == [
        ("run.running", "running"),
        ("step.attempt", "error"),
        ("run.transition", "waiting"),
        ("run.execution_ended", "waiting"),
        ("run.running", "running"),
        ("step.attempt", "ok"),
        ("run.transition", "completed"),
        ("run.execution_ended", "completed"),
    ]
    assert all(r.run_id == handle.run_id and r.workflow == "wf" for r in lines)
    failed, ok = (r for r in lines if r.event == "step.attempt")
    assert (failed.step, failed.attempt, failed.error_type, failed.retry_delay_s) == (
        "enrich", 1, "ConnectionError", 3.0,
    )  # fmt: skip
    assert failed.levelno == logging.WARNING and isinstance(failed.duration_s, float)
    assert failed.getMessage() == (
        f"run {handle.run_id} wf step enrich attempt 1 error in {failed.duration_s:g}s (ConnectionError), retry in 3s"
    )
    assert (ok.attempt, ok.levelno) == (2, logging.DEBUG)
    assert not hasattr(ok, "error_type") and not hasattr(ok, "retry_delay_s")
    first_start = lines[0]
    assert first_start.fresh is True and first_start.taken_over is False and first_start.delay_s >= 0
    everything = " ".join(r.getMessage() + repr(vars(r)) for r in lines)
    assert SECRET not in everything and "503 from the CRM" not in everything  # (a run id may hold "503")


async def test_a_failed_run_logs_a_warning_with_its_error_type(h, caplog):
    async def body(ctx):
        async def broken(step):
            raise ValueError(f"bad: {SECRET}")

        return await ctx.step("broken", broken, max_retries=0)

    reg = setup(use={"wf": workflow(body)})
    await h.client(reg, "wf").aget_or_create(["k"])
    caplog.set_level(logging.INFO, logger=LOGGER)
    await arun_until_idle(reg, store=h.store, clock=h.clock, observers=[ActivityLogObserver()])
    [failed] = [r for r in _lines(caplog) if r.event == "run.transition"]
    assert failed.levelno == logging.WARNING and failed.status == "failed" and failed.error_type
    assert SECRET not in failed.getMessage()


async def test_at_info_a_run_logs_its_lines_and_its_problems__not_each_step_that_succeeded(h, caplog):
    reg = _flaky()
    await h.client(reg, "wf").aget_or_create(["k"])
    caplog.set_level(logging.INFO, logger=LOGGER)
    await arun_until_idle(reg, store=h.store, clock=h.clock, observers=[ActivityLogObserver()])
    steps = [(r.outcome, r.levelno) for r in _lines(caplog) if r.event == "step.attempt"]
    assert steps == [("error", logging.WARNING)]
    assert [r.event for r in _lines(caplog)].count("run.transition") == 2  # waiting, completed


async def test_below_its_level_the_observer_writes_nothing(h, caplog):
    reg = _flaky()
    await h.client(reg, "wf").aget_or_create(["k"])
    caplog.set_level(logging.ERROR, logger=LOGGER)
    await arun_until_idle(reg, store=h.store, clock=h.clock, observers=[ActivityLogObserver()])
    assert _lines(caplog) == []


def test_workflows_log_json_writes_each_line_as_one_json_object():
    """The project's LOGGING, as a process started with WORKFLOWS_LOG_JSON=1 builds it."""
    script = (
        "import django, logging; django.setup();"
        "logging.getLogger('workflows.activity').warning('run r1 wf step s attempt 2 error',"
        " extra={'event': 'step.attempt', 'run_id': 'r1', 'step': 's', 'attempt': 2, 'error_type': 'Boom'})"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "WORKFLOWS_LOG_JSON": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.strip()]
    record = json.loads(line)
    assert record["logger"] == "workflows.activity" and record["level"] == "WARNING"
    assert record["message"] == "run r1 wf step s attempt 2 error"
    assert (record["event"], record["run_id"], record["step"], record["attempt"], record["error_type"]) == (
        "step.attempt", "r1", "s", 2, "Boom",
    )  # fmt: skip
    assert "time" in record

    plain = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env={**env, "WORKFLOWS_LOG_JSON": "0"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (
        plain.returncode == 0
        and "WARNING workflows.activity: run r1 wf step s attempt 2 error" in plain.stderr
    )
