"""`runworkflows --until-idle` says what it ran: one line at the end, by workflow and outcome."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from . import tasks


def _until_idle() -> str:
    out = io.StringIO()
    call_command("runworkflows", "--until-idle", stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_until_idle_prints_the_executions_and_step_attempts_it_ran():
    tasks.add.enqueue(1, 2)
    tasks.add.enqueue(3, 4)
    printed = _until_idle()
    assert "runworkflows --until-idle: 2 executions in " in printed
    assert "2 step attempts: django.task completed 2." in printed


@pytest.mark.django_db(transaction=True)
def test_until_idle_with_nothing_due_says_so():
    assert "runworkflows --until-idle: nothing was due" in _until_idle()
