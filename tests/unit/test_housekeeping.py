"""The runner's periodic housekeeping (workflows.engine.housekeeping.every): a job that finds the
database out of reach is logged in one line, without a traceback (a partition or a restart is
not a bug), and runs again at its next turn; any other failure is logged with its traceback."""

from __future__ import annotations

import asyncio
import logging

import pytest

from workflows.core.exceptions import StoreUnavailable
from workflows.engine.housekeeping import every


def run_every(job_error: Exception, caplog) -> int:
    calls = 0

    async def job() -> None:
        nonlocal calls
        calls += 1
        raise job_error

    with caplog.at_level(logging.WARNING, logger="workflows.engine.runner"):
        asyncio.run(every(0.001, job, owner="r1", stopping=lambda: calls >= 2))
    return calls


def test_the_database_out_of_reach_is_one_line_and_the_job_runs_again(caplog):
    calls = run_every(StoreUnavailable("the database failed: couldn't get a connection"), caplog)

    assert calls == 2
    lines = [r for r in caplog.records if "periodic" in r.getMessage()]
    assert len(lines) == 2 and all(r.levelno == logging.WARNING and r.exc_info is None for r in lines)
    assert "couldn't get a connection" in lines[0].getMessage()


@pytest.mark.parametrize("error", [RuntimeError("a bug")])
def test_any_other_failure_keeps_its_traceback(caplog, error):
    run_every(error, caplog)
    assert all(r.exc_info is not None for r in caplog.records if "periodic" in r.getMessage())
    assert caplog.records
