"""Recordable JSON: strict, with errors naming the culprit; NUL refused (jsonb cannot hold it)."""

import pytest

from workflows.core.exceptions import InvalidKey, NotRecordable
from workflows.core.jsonvalue import dumps, normalize
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
