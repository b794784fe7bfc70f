"""The store numbers its statements' `%s` placeholders itself (`prepared._numbered`): the same
text psycopg's tokenizer makes of every statement the store builds, and psycopg's own reading of
any text with another `%`."""

from __future__ import annotations

import pytest
from psycopg import ProgrammingError, _queries
from psycopg.adapt import Transformer

from workflows.storage.django import prepared
from workflows.storage.django.statements import postgres, shared


def store_statements() -> list[bytes]:
    texts = [
        value.encode()
        for module in (postgres, shared)
        for value in vars(module).values()
        if isinstance(value, str) and "%s" in value
    ]
    assert len(texts) > 20  # the store's statement texts were found
    return texts


@pytest.mark.parametrize("text", store_statements())
def test_the_split_numbers_as_psycopg_does(text: bytes) -> None:
    numbered = prepared._numbered(text)
    theirs, _formats, _order, parts = _queries._query2pg_nocache(text, "utf-8")
    if numbered is None:  # a `%` of another kind: psycopg reads it
        assert b"%" in text.replace(b"%s", b"")
        return
    assert numbered[0] == theirs
    assert len(numbered[1]) == len(parts)


def test_another_percent_goes_to_psycopg_and_counts_are_checked() -> None:
    assert prepared._numbered(b"SELECT %s LIKE 'a%%'") is None
    assert prepared._numbered(b"SELECT %(name)s") is None
    query = prepared.query_class()(Transformer())
    query.convert("SELECT %s, 'x%%' LIKE %s", [1, "a"])
    assert query.query == b"SELECT $1, 'x%' LIKE $2"
    query.convert("SELECT %s, %s::text FROM t WHERE a = %s", [1, "a", None])
    assert query.query == b"SELECT $1, $2::text FROM t WHERE a = $3"
    assert query.params is not None and len(query.params) == 3
    with pytest.raises(ProgrammingError, match="1 placeholders but 2 parameters"):
        query.convert("SELECT %s", [1, 2])
