"""The retention policy alone (workflows.core.retention): when a finished run falls due, what is
kept forever, and the refusals of a malformed setting."""

from __future__ import annotations

import datetime as dt

import pytest

from workflows.core.retention import DEFAULT_AUDITED_DAYS, Retention

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
POLICY = Retention.from_setting({"completed": 30, "cancelled": 7, "failed": 90})


def test_from_setting__days_by_status_and_the_audit_default():
    assert POLICY.days == {"completed": 30.0, "cancelled": 7.0, "failed": 90.0}
    assert POLICY.audited_days == DEFAULT_AUDITED_DAYS and POLICY.enabled
    assert Retention.from_setting({"failed": None, "audited": None}).audited_days is None
    assert not Retention.from_setting({}).enabled and not Retention.from_setting({"failed": None}).enabled


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"complete": 30}, "unknown key(s) complete"),
        ({"failed": -1}, '"failed" must be a number of days'),
        ({"failed": "90"}, "not '90'"),
        ({"failed": True}, "not True"),
        ({"failed": float("nan")}, "not nan"),
        ({"failed": 10**9}, "from 0 to 100000"),
        ([30], "must be a dict"),
    ],
)
def test_from_setting__refuses_what_it_cannot_apply(raw, problem):
    with pytest.raises(ValueError) as caught:
        Retention.from_setting(raw)
    assert problem in str(caught.value)


def test_kept_until__finished_plus_the_status_days_or_the_last_audit_plus_its_days():
    finished = NOW - dt.timedelta(days=10)
    assert POLICY.kept_until("failed", finished) == finished + dt.timedelta(days=90)
    assert POLICY.kept_until("cancelled", finished) == finished + dt.timedelta(days=7)
    audited = NOW - dt.timedelta(days=5)
    assert POLICY.kept_until("failed", finished, audited) == audited + dt.timedelta(days=365)
    short_audit = Retention(days={"failed": 90}, audited_days=1)
    assert short_audit.kept_until("failed", finished, audited) == finished + dt.timedelta(days=90)
    assert Retention(days={"failed": 90}, audited_days=None).kept_until("failed", finished, audited) is None


@pytest.mark.parametrize("status", ["pending", "running", "waiting"])
def test_kept_until__a_live_run_is_never_due(status):
    assert POLICY.kept_until(status, NOW - dt.timedelta(days=1000)) is None
    assert POLICY.describe(status) == "live runs are never pruned"


def test_cutoffs_and_descriptions():
    assert POLICY.cutoff("failed", NOW) == NOW - dt.timedelta(days=90)
    assert Retention(days={"failed": 90}).cutoff("completed", NOW) is None
    assert POLICY.audit_cutoff(NOW) == NOW - dt.timedelta(days=365)
    assert POLICY.describe("failed") == "failed runs are kept 90 days"
    assert Retention(days={"completed": 1}).describe("completed") == "completed runs are kept 1 day"
    assert Retention().describe("completed") == "completed runs are kept forever"
    assert POLICY.describe("failed", audited=True) == (
        "failed runs are kept 90 days, and 365 days after their last audit entry"
    )
    assert (
        POLICY.describe_audited() == "runs with audit entries are kept at least 365 days after the last one"
    )
