"""`schedule(...)` and `setup(..., schedules=[...])`: a bad declaration is a clear error naming the
schedule, raised when the code is loaded, never at a fire."""

from __future__ import annotations

import datetime as dt

import pytest

from workflows import ScheduleError, schedule, setup, workflow


async def body(ctx):
    return None


WF = workflow(body)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("0 9 * * 1-8", "wf"), {"name": "daily"}, r"schedule 'daily': '0 9 \* \* 1-8' is not a valid cron"),
        (("every day", "wf"), {}, r"schedule 'every day' of 'wf': 'every day' is not a valid cron"),
        ((None, "wf"), {"name": "n"}, "is not a valid cron"),
        (("0 9 * * *", "wf"), {"name": "n", "timezone": "Europe/Pariss"}, "unknown timezone 'Europe/Pariss'"),
        (("0 9 * * *", "wf"), {"name": "n", "timezone": "../etc/passwd"}, "unknown timezone"),
        (("0 9 * * *", "wf"), {"name": "n", "timezone": 1}, "timezone must be an IANA name"),
        (
            ("0 9 * * *", "wf"),
            {"name": "n", "catch_up": "some"},
            "catch_up must be 'skip', 'all' or a number",
        ),
        (("0 9 * * *", "wf"), {"name": "n", "catch_up": -1}, "catch_up must be"),
        (("0 9 * * *", "wf"), {"name": "n", "catch_up": True}, "catch_up must be"),
        (("0 9 * * *", "wf"), {"name": " "}, "name must be a non-empty string"),
        (("0 9 * * *", "wf"), {"name": "n" * 201}, "of at most 200 characters"),
        (("0 9 * * *", "wf"), {"name": "a\x00b"}, "the name contains a NUL"),
        (("0 9 * * *", "wf"), {"name": "n", "key": "k"}, "key must be a function"),
        (("0 9 * * *", 42), {"name": "n"}, "workflow must be a workflow's name"),
    ],
)
def test_bad_declarations_are_clear_errors(args, kwargs, message):
    with pytest.raises(ScheduleError, match=message):
        schedule(*args, **kwargs)


def test_setup__binds_a_workflow_object_to_its_name_and_names_the_schedule_after_it():
    reg = setup(use={"report": WF}, schedules=[schedule("0 9 * * *", WF, timezone="Europe/Paris")])
    [spec] = reg.schedules.values()
    assert (spec.name, spec.workflow) == ("report", "report")


@pytest.mark.parametrize(
    ("schedules", "message"),
    [
        ([schedule("0 9 * * *", "nope")], "no workflow named 'nope'"),
        ([schedule("0 9 * * *", workflow(body, version="x"))], "its workflow is not registered"),
        ([schedule("0 9 * * *", "wf"), schedule("0 10 * * *", "wf")], "is declared twice"),
        (
            [schedule("0 9 * * *", "wf", name="a", key=lambda t: "not a list")],
            "its key function returned a bad key",
        ),
        ([schedule("0 9 * * *", "wf", name="a", key=lambda t: 1 / 0)], "its key function failed"),
    ],
)
def test_setup__refuses_bad_schedules_naming_them(schedules, message):
    with pytest.raises(ScheduleError, match=message):
        setup(use={"wf": WF}, schedules=schedules)


def test_merged_registries_keep_their_schedules_and_refuse_a_name_twice():
    a = setup(use={"a": WF}, schedules=[schedule("0 9 * * *", "a")])
    b = setup(use={"b": workflow(body, version="b")}, schedules=[schedule("0 9 * * *", "b")])
    assert sorted(a.merged(b).schedules) == ["a", "b"]
    c = setup(use={"c": workflow(body, version="c")}, schedules=[schedule("0 9 * * *", "c", name="a")])
    with pytest.raises(ValueError, match="schedule names declared twice"):
        a.merged(c)


def test_key_function__gets_the_local_fire_time():
    spec = setup(
        use={"wf": WF},
        schedules=[
            schedule("0 9 * * *", "wf", timezone="Asia/Tokyo", key=lambda t: ["day", t.date().isoformat()])
        ],
    ).schedules["wf"]
    fire = dt.datetime(2026, 12, 1, 0, 0, tzinfo=dt.UTC)  # 09:00 in Tokyo
    assert spec.run_key(fire) == ["day", "2026-12-01"]


def test_due__daylight_saving_days_have_one_fire_each():
    spec = setup(
        use={"wf": WF}, schedules=[schedule("30 2 * * *", "wf", timezone="Europe/Paris", catch_up="all")]
    )
    spec = spec.schedules["wf"]
    since = dt.datetime(2026, 3, 28, 0, 0, tzinfo=dt.UTC)
    fires = spec.due(since, dt.datetime(2026, 3, 31, 0, 0, tzinfo=dt.UTC))
    assert len(fires) == 3  # the 29th (no 02:30 that night) still fires once, at 03:00
