"""Turning values into recordable JSON, with errors that name what failed."""

from __future__ import annotations

import json
import re
from typing import Any

from .exceptions import NotRecordable

# A JSON-escaped NUL: \u0000 after an even number of backslashes (so not the text "\\u0000").
_ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def dumps(value: Any, what: str) -> str:
    """Serialize `value` strictly (no NaN, no objects); `what` names the culprit in the error."""
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise NotRecordable(f"{what} is not JSON-serializable: {exc}") from None
    if "\\u0000" in text and _ESCAPED_NUL.search(text):  # jsonb cannot store NUL: refuse it everywhere
        raise NotRecordable(f"{what} contains a NUL character (\\u0000), which cannot be stored")
    return text


def normalize(value: Any, what: str) -> Any:
    """A JSON round trip: the value exactly as a replay will see it (tuples become lists...)."""
    return json.loads(dumps(value, what))
