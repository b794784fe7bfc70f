"""The run page says how long a finished run is kept, and why, by WORKFLOWS["RETENTION"]."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from tests.inspector.test_admin import admin_client, failed_approval, url, waiting_approval  # noqa: F401
from workflows.models import AuditEntry

pytestmark = pytest.mark.django_db


def kept_fact(page: str) -> str | None:
    """The "Kept until" fact's text, tags and spaces collapsed; None when the page has none."""
    found = re.search(r'<div class="wf-fact" data-kept>(.*?)</div></div>', page, re.S)
    return None if found is None else " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())


def test_a_failed_run_says_until_when_and_the_rule(admin_client, settings):  # noqa: F811
    settings.WORKFLOWS = {**settings.WORKFLOWS, "RETENTION": {"completed": 30, "failed": 90}}
    run = failed_approval()
    until = (run.finished_at + dt.timedelta(days=90)).strftime("%Y-%m-%d")
    page = admin_client.get(url("inspect", run.id)).content.decode()
    assert kept_fact(page) == f"Kept until {until} failed runs are kept 90 days"


def test_an_audited_run_is_kept_past_its_rule_after_the_last_audit_entry(admin_client, settings):  # noqa: F811
    settings.WORKFLOWS = {**settings.WORKFLOWS, "RETENTION": {"failed": 90, "audited": 365}}
    run = failed_approval()
    AuditEntry.objects.create(run=run, action="send", actor="ops", created_at=run.finished_at)
    until = (run.finished_at + dt.timedelta(days=365)).strftime("%Y-%m-%d")
    page = admin_client.get(url("inspect", run.id)).content.decode()
    assert kept_fact(page) == (
        f"Kept until {until} failed runs are kept 90 days, and 365 days after their last audit entry"
    )


def test_without_retention_a_finished_run_is_kept_forever_and_a_live_run_shows_nothing(admin_client):  # noqa: F811
    failed = failed_approval()
    assert kept_fact(admin_client.get(url("inspect", failed.id)).content.decode()) == (
        "Kept forever failed runs are kept forever"
    )
    waiting = waiting_approval()
    assert kept_fact(admin_client.get(url("inspect", waiting.id)).content.decode()) is None
