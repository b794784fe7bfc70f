"""Request bodies parsed as JSON with a depth limit, for every NinjaAPI that serves the engine.

Python's parser gives up on deep nesting with a RecursionError (a 500 where a view parses the body
itself), and the engine refuses values deeper than `MAX_DEPTH` anyway: a body nested deeper than
`MAX_BODY_DEPTH` (128, above the values' own `workflows.core.jsonvalue.MAX_DEPTH`) is refused at once as `JsonTooDeep`, which the API answers with 400 `bad_request`
naming the limit (`workflows.http.install_error_handlers` installs `JsonParser` on an API
that still has Ninja's default parser).
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest
from ninja.parser import Parser

from ..core.jsonvalue import nested_deeper_than

MAX_BODY_DEPTH = 128
"""Above `MAX_DEPTH`: a request's own objects wrap the values it carries (each allowed `MAX_DEPTH`
levels), so a value a little too deep is refused as that field's mistake (422), not the body's."""


class JsonTooDeep(ValueError):
    """A JSON document nested deeper than `MAX_BODY_DEPTH` levels of arrays and objects."""

    def __init__(self) -> None:
        super().__init__(f"the JSON body is nested more than {MAX_BODY_DEPTH} levels deep")


def parse_json(raw: bytes | str) -> Any:
    """`json.loads(raw)`, refusing too deep a document with JsonTooDeep (a ValueError, like a
    body that is not JSON) rather than a RecursionError."""
    try:
        data = json.loads(raw)
    except RecursionError:
        raise JsonTooDeep() from None
    # Brackets inside strings only overcount: below the limit, the document cannot be too deep.
    if isinstance(data, dict | list) and _brackets(raw) > MAX_BODY_DEPTH:
        if nested_deeper_than(data, MAX_BODY_DEPTH):
            raise JsonTooDeep()
    return data


class JsonParser(Parser):
    """Ninja's JSON body parser with the depth limit of `parse_json`."""

    def parse_body(self, request: HttpRequest) -> Any:
        return parse_json(request.body)


def _brackets(raw: bytes | str) -> int:
    if isinstance(raw, bytes):
        return raw.count(b"[") + raw.count(b"{")
    return raw.count("[") + raw.count("{")
