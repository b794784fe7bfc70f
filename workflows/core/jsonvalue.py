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


def contains_nul(value: Any) -> bool:
    """True when a string anywhere in `value` (keys included) holds NUL, which PostgreSQL cannot
    store in text or jsonb. Iterative: a deeply nested value cannot overflow the stack."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


NUL_REFUSED = "text must not contain the NUL character (\\u0000)"
