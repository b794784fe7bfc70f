"""`jobs submit --follow` says plainly when no runner can take the job: none alive, or none that
knows its workflow, and how long the job has waited; and when a runner comes."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import CommandError, call_command

from jobs.follow import RunnerWatch
from jobs.submission import jobs_client
from tests.support import now
from workflows import conf
from workflows.core.records import RunnerRecord

pytestmark = pytest.mark.django_db


def announce(owner: str, workflows: dict[str, list[str]], seen_ago: float = 0.0) -> None:
    conf.default_store().register_runner(
        RunnerRecord(
            owner=owner, host="box", pid=7, started_at=now(), last_seen=now() - dt.timedelta(seconds=seen_ago),
            lease_seconds=30.0, concurrency=2, workflows=workflows,
        )
    )  # fmt: skip


def submit_and_follow(tmp_path) -> str:
    transcript = tmp_path / "call.txt"
    transcript.write_text("Acme Corp called. I will send the deck.")
    out = io.StringIO()
    with pytest.raises(CommandError, match="job still pending"):
        call_command(
            "jobs", "submit", "--title", "Call", "--transcript-file", str(transcript),
            "--follow", "--timeout", "0.5", stdout=out,
        )  # fmt: skip
    return out.getvalue()


def test_follow__no_runner_alive(tmp_path):
    announce("box:7:dead", {"aiJob": ["1"]}, seen_ago=3600)  # long dead: does not count
    printed = submit_and_follow(tmp_path)
    assert "  ! no runner is alive: the job has waited 0s (since " in printed
    assert "python manage.py runworkflows" in printed
    assert printed.count("no runner is alive") == 1  # said once, not at every poll


def test_follow__runners_alive_but_none_knows_the_workflow(tmp_path):
    announce("box:7:aaaa", {"invoice": ["1"]})
    printed = submit_and_follow(tmp_path)
    assert (
        "  ! no live runner knows the workflow aiJob (the 1 alive serve invoice): the job has waited"
        in printed
    )


def test_follow__silent_while_a_runner_serves_it_and_says_when_one_comes():
    handle = jobs_client().get_or_create(["watch-1"])
    out = io.StringIO()
    watch = RunnerWatch(handle, out)
    watch.check(handle.info(), None)
    assert "no runner is alive" in out.getvalue()
    announce("box:7:aaaa", {"invoice": ["1"]})  # alive, but not for this job
    announce("box:7:bbbb", {"aiJob": ["1"]})
    watch.next_check = 0.0  # look again now
    watch.check(handle.info(), None)
    assert out.getvalue().endswith("  runner box:7:bbbb is up: the job goes on\n")
    before = out.getvalue()
    watch.next_check = 0.0
    watch.check(handle.info(), None)
    assert out.getvalue() == before  # served: nothing to say
