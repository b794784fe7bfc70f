"""Text PostgreSQL cannot store (a lone surrogate, NUL) and too deep JSON, over HTTP and the
operator's commands: a 4xx in the one error shape (or a CommandError) that names the field, and
nothing written. A client sends a lone surrogate as the JSON escape `\\ud83d` (as json.dumps does)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.api.helpers import assert_error, counts
from workflows.core.jsonvalue import MAX_DEPTH
from workflows.http.parser import MAX_BODY_DEPTH, JsonTooDeep, parse_json
from workflows.models import Entry, Message, Run
from workflows.testing import run_until_idle

LONE = "\ud83d"  # the first half of 😀 without its second half; json.dumps sends it as \ud83d
PAIR = "\\ud83d\\ude00"  # JSON text: 😀 as a surrogate pair, which is fine


def nested(depth: int, leaf=0):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def deep(depth: int) -> str:
    """JSON text nested `depth` levels (too deep for json.dumps to write)."""
    return "[" * depth + "0" + "]" * depth


@pytest.fixture
def run_id(api) -> str:
    return api.post("/api/workflows/approval/runs", {"key": ["a"]}).json()["id"]


@pytest.fixture
def failed_run(api, registry) -> str:
    from tests.api import flows

    flows.FAILURES.update(check=1)
    run_id = api.post("/api/workflows/flaky/runs", {"key": ["f"]}).json()["id"]
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).status == "failed"
    return run_id


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/workflows/approval/runs", {"key": [f"a{LONE}"]}, "key"),
        ("/api/workflows/approval/runs", {"key": ["b"], "message": {"queue": "note", "body": LONE}}, "message"),
        ("/api/runs/{run}/messages", {"queue": "note", "body": {f"x{LONE}": 1}}, "body"),
        ("/api/runs/{run}/messages", {"queue": "note", "body": [["\udfff"]]}, "body"),
        ("/api/runs/{run}/messages", {"queue": "note", "body": 1, "reason": f"ok {LONE}"}, "reason"),
        ("/api/runs/{run}/cancel", {"reason": LONE}, "reason"),
        ("/api/runs/{run}/messages", {"queue": "note", "body": nested(MAX_DEPTH + 1)}, "body"),
    ],
    ids=["key", "start-message", "body-dict-key", "body-low-half", "send-reason", "cancel-reason", "too-deep"],
)  # fmt: skip
def test_unstorable_values__are_422_naming_the_field(api, run_id, path, body, field):
    before = counts()

    response = api.post(path.format(run=run_id), body)

    error = assert_error(response, 422, "invalid_request")
    assert any(field in e["loc"] for e in error["detail"]), error
    assert counts() == before


def test_a_surrogate_pair__is_one_character_and_fine(api, run_id):
    response = api.post(f"/api/runs/{run_id}/messages", raw=f'{{"queue": "note", "body": "{PAIR}"}}')

    assert response.status_code == 202, response.content
    assert Message.objects.get().body == "\U0001f600"


def test_max_depth__a_value_at_the_limit_is_accepted(api, run_id):
    response = api.post(f"/api/runs/{run_id}/messages", {"queue": "note", "body": nested(MAX_DEPTH)})

    assert response.status_code == 202, response.content


@pytest.mark.parametrize("depth", [MAX_BODY_DEPTH + 1, 100_000])
def test_a_too_deep_body__is_400_naming_the_limit(api, run_id, depth):
    before = counts()

    response = api.post(f"/api/runs/{run_id}/messages", raw=f'{{"queue": "note", "body": {deep(depth - 1)}}}')

    error = assert_error(response, 400, "bad_request")
    assert f"nested more than {MAX_BODY_DEPTH} levels" in error["message"]
    assert counts() == before


@pytest.mark.parametrize(
    "extra",
    [{"input": {"n": LONE}}, {"input": nested(MAX_DEPTH + 1)}, {"reason": LONE}],
    ids=["input", "deep-input", "reason"],
)
def test_replay__an_unstorable_input_or_reason_is_422_and_changes_nothing(api, failed_run, extra):
    check = Entry.objects.get(run_id=failed_run, name="check")
    before = counts()

    response = api.post(f"/api/runs/{failed_run}/replay", {"entry_id": check.id, "reason": "fix", **extra})

    assert_error(response, 422, "invalid_request")
    assert counts() == before
    assert Run.objects.get(id=failed_run).status == "failed"
    assert not Entry.objects.filter(run_id=failed_run, superseded=True).exists()


def test_parse_json__too_deep_is_a_value_error_never_a_recursion_error():
    at_limit = "[" * MAX_BODY_DEPTH + "]" * MAX_BODY_DEPTH
    assert parse_json(at_limit) == json.loads(at_limit)
    for depth in (MAX_BODY_DEPTH + 1, 100_000):
        with pytest.raises(JsonTooDeep, match=f"more than {MAX_BODY_DEPTH} levels"):
            parse_json(b"[" * depth + b"]" * depth)
    assert parse_json(json.dumps({"a": "[" * 1000})) == {"a": "[" * 1000}  # brackets in text


# --- the operator's commands -----------------------------------------------------------------


def cmd(*args: str) -> str:
    out = io.StringIO()
    call_command("workflows", *args, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(
    "args",
    [
        ["--reason", "\udcff"],  # argv bytes that are not UTF-8 arrive as lone surrogates
        ["--reason", "fix", "--input", json.dumps({"n": LONE})],
        ["--reason", "fix", "--input", deep(MAX_DEPTH + 1)],
        ["--reason", "fix", "--input", deep(100_000)],
    ],
    ids=["reason", "input", "deep-input", "far-too-deep-input"],
)
def test_command_replay__unstorable_reason_or_input_is_an_error_and_changes_nothing(failed_run, args):
    check = Entry.objects.get(run_id=failed_run, name="check")
    before = counts()

    with pytest.raises(CommandError, match=r"surrogate|nested more than"):
        cmd("replay", failed_run, "--entry", str(check.id), *args)

    assert counts() == before
    assert Run.objects.get(id=failed_run).status == "failed"


def test_command_cancel_and_send__an_unstorable_reason_or_body_is_an_error(run_id):
    before = counts()

    with pytest.raises(CommandError, match="the reason contains a lone surrogate"):
        cmd("cancel", run_id, "--reason", "\udcff")
    with pytest.raises(CommandError, match="surrogate"):
        cmd("send", run_id, "note", "--body", json.dumps(LONE), "--reason", "ok")
    with pytest.raises(CommandError, match="nested more than"):
        cmd("send", run_id, "note", "--body", deep(100_000), "--reason", "ok")

    assert counts() == before
