"""Recordable JSON: strict, with errors naming the culprit; NUL refused (jsonb cannot hold it)."""

import datetime as dt

import pytest

from workflows.core.exceptions import InvalidKey, NotRecordable
from workflows.core.jsonvalue import MAX_DEPTH, copy_json, dumps, normalize, storable_text
from workflows.core.keys import validate_key


def test_normalize__tuples_become_lists():
    assert normalize({"a": (1, 2)}, "x") == {"a": [1, 2]}


@pytest.mark.parametrize("value", [{1, 2}, float("nan"), object(), {"k": b"bytes"}])
def test_dumps__not_json_names_the_culprit(value):
    with pytest.raises(NotRecordable, match="the output of step 'x'"):
        dumps(value, "the output of step 'x'")


@pytest.mark.parametrize("value", ["a\x00b", {"k\x00": 1}, ["\\\\\x00"]])
def test_dumps__nul_is_refused(value):
    with pytest.raises(NotRecordable, match="NUL"):
        dumps(value, "v")


@pytest.mark.parametrize("value", ["\\u0000", "\\\\u0000 text", {"path": "C:\\u0000"}])
def test_dumps__the_text_backslash_u0000_is_fine(value):
    assert normalize(value, "v") == value


def test_key__nul_refused():
    with pytest.raises(InvalidKey):
        validate_key(["a\x00"])


# --- lone surrogates and depth: what PostgreSQL (or a parser's stack) cannot take ------------


def _nested(depth: int):
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", ["\ud83d", {"k\udfff": 1}, [["a", {"b": ["\udc00"]}]], ("\ud800",)])
def test_dumps__a_lone_surrogate_is_refused(value):
    with pytest.raises(NotRecordable, match=r"the output of step 'x' contains a lone surrogate \(\\ud"):
        dumps(value, "the output of step 'x'")


@pytest.mark.parametrize("value", ["\U0001f600", "\\ud83d", "\\\\ud83d", {"\U0001f600": "\\ud83d"}])
def test_dumps__astral_characters_and_the_text_backslash_ud83d_are_fine(value):
    assert normalize(value, "v") == value


def test_dumps__depth_is_limited_at_max_depth():
    assert normalize(_nested(MAX_DEPTH), "v") == _nested(MAX_DEPTH)
    assert normalize({"a": _nested(MAX_DEPTH - 1)}, "v") == {"a": _nested(MAX_DEPTH - 1)}
    for too_deep in (_nested(MAX_DEPTH + 1), {"a": _nested(MAX_DEPTH)}, _nested(50_000)):
        with pytest.raises(NotRecordable, match=f"v is nested more than {MAX_DEPTH} levels deep"):
            normalize(too_deep, "v")


def test_dumps__many_brackets_in_text_are_not_depth():
    assert normalize({"text": "[" * 500, "items": [[1]] * 500}, "v")["text"] == "[" * 500


def test_key__a_lone_surrogate_is_refused():
    with pytest.raises(InvalidKey, match="lone surrogate"):
        validate_key(["ok", "\udcff"])


def test_storable_text__escapes_what_cannot_be_stored():
    assert storable_text("a\x00b\ud83dc\U0001f600") == "a\\u0000b\\ud83dc\U0001f600"


def test_copy_json__a_deep_copy_that_shares_nothing_mutable():
    original = {"a": [1, {"b": "x"}], "c": {"d": [None, True, 1.5]}}
    copied = copy_json(original)
    assert copied == original
    copied["a"][1]["b"] = "changed"
    copied["c"]["d"].append(2)
    assert original == {"a": [1, {"b": "x"}], "c": {"d": [None, True, 1.5]}}


def test_copy_json__values_that_are_not_json_yet_are_deep_copied_too():
    when = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    original = {"when": when, "pair": ([1], 2), "items": {3, 4}}
    copied = copy_json(original)
    assert copied == original
    copied["pair"][0].append(9)
    assert original["pair"] == ([1], 2)
