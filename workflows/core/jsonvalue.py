"""Turning values into recordable JSON, with errors that name what failed.

What PostgreSQL cannot store is refused here, once, for every entry point (step outputs, state,
messages, events, run keys, operators' reasons, edited inputs), on SQLite as on PostgreSQL:

- text holding NUL (`\\u0000`): neither `text` nor `jsonb` can hold it;
- text holding a lone surrogate (a code point U+D800-U+DFFF, e.g. JSON `"\\ud83d"` without its
  pair): it has no UTF-8 encoding (a JSON pair such as `"\\ud83d\\ude00"` decodes to one proper
  character and is fine);
- JSON nested more than `MAX_DEPTH` arrays and objects deep: beyond it parsers (Python's, the
  database's) run out of stack;
- a value whose compact JSON text, in UTF-8, is longer than the configured limit (`set_max_bytes`; the
  Django app sets WORKFLOWS["MAX_VALUE_BYTES"], 1 MiB by default): `ValueTooLarge`. A recorded
  value is read back whole on every replay and every page that shows it, so a large one is
  refused where it is made, naming it, rather than slowing every later read of the run.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

from .exceptions import NotRecordable, ValueTooLarge

MAX_DEPTH = 100
"""The deepest nesting of arrays and objects a recorded value may have (a scalar is depth 0)."""

_UNSTORABLE_CHAR = re.compile("[\x00\ud800-\udfff]")

DEFAULT_MAX_BYTES = 1024 * 1024


def _default_max_bytes() -> int | None:
    return DEFAULT_MAX_BYTES


_max_bytes: Callable[[], int | None] = _default_max_bytes


def set_max_bytes(limit: Callable[[], int | None]) -> None:
    """Where the size limit comes from: a callable read on every check (so a changed setting
    applies at once); it returns the largest JSON text accepted, in bytes, or None for no limit."""
    global _max_bytes
    _max_bytes = limit


def max_bytes() -> int | None:
    """The largest recorded value now, in bytes of compact JSON (None: no limit)."""
    return _max_bytes()


def dumps(value: Any, what: str, *, sized: bool = True) -> str:
    """Serialize `value` strictly (no NaN, no objects, nothing PostgreSQL cannot store, nothing
    over the size limit unless `sized` is False); `what` names the culprit in the error."""
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except RecursionError:
        raise NotRecordable(f"{what} is nested more than {MAX_DEPTH} levels deep") from None
    except (TypeError, ValueError) as exc:
        raise NotRecordable(f"{what} is not JSON-serializable: {exc}") from None
    # Cheap tests on the text first; only a hit walks the value (json.dumps escapes NUL and every
    # surrogate, so "\\u0000" / "\\ud" are in the text whenever one is in the value).
    if "\\u0000" in text or "\\ud" in text or text.count("[") + text.count("{") > MAX_DEPTH:
        problem = unstorable(value)
        if problem is not None:
            raise NotRecordable(f"{what} {problem}")
    return check_size(text, what) if sized else text


def check_size(text: str, what: str) -> str:
    """`text` (JSON from `dumps`) itself when its UTF-8 size is within the limit; ValueTooLarge
    otherwise. `text` escapes every non-ASCII character (`\\u00e9`), so its length is an upper
    bound of the UTF-8 size: only a text over the limit that holds escapes is measured exactly."""
    limit = _max_bytes()
    if limit is None or len(text) <= limit:
        return text
    size = len(text)
    if "\\u" in text:
        size = len(json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":")).encode())
    if size > limit:
        raise ValueTooLarge(what, size, limit)
    return text


def normalize(value: Any, what: str) -> Any:
    """A JSON round trip: the value exactly as a replay will see it (tuples become lists...)."""
    return json.loads(dumps(value, what))


def unstorable(value: Any) -> str | None:
    """Why PostgreSQL could not store `value` (a string, or JSON-like data walked keys included),
    as the end of a sentence ("contains a NUL character ..."); None when it can. Iterative: a
    deeply nested value cannot overflow the stack."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            found = _UNSTORABLE_CHAR.search(item)
            if found is not None:
                return _describe(found.group())
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_DEPTH:
                return f"is nested more than {MAX_DEPTH} levels deep"
            if isinstance(item, dict):
                stack.extend((k, depth) for k in item.keys())
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
    return None


def nested_deeper_than(value: Any, limit: int) -> bool:
    """True when arrays and objects in `value` nest more than `limit` levels. Iterative."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((v, depth + 1) for v in children)
    return False


def check_text(text: str, what: str) -> str:
    """`text` itself when PostgreSQL can store it; NotRecordable naming `what` otherwise."""
    problem = unstorable(text)
    if problem is not None:
        raise NotRecordable(f"{what} {problem}")
    return text


def storable_text(text: str) -> str:
    """`text` with what PostgreSQL cannot store written as escapes (`\\u0000`, `\\ud83d`): for
    diagnostics (an exception's message) that must be recorded rather than refused."""
    return _UNSTORABLE_CHAR.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _describe(char: str) -> str:
    if char == "\x00":
        return "contains a NUL character (\\u0000), which cannot be stored"
    return f"contains a lone surrogate (\\u{ord(char):04x}), which cannot be stored as text"


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars), several times cheaper than
    `copy.deepcopy`, which the engine paid on every step that reads state: no memo, since a
    recorded value holds no shared references once stored. Anything else (a value the workflow
    put in state that is not JSON yet) is copied by `copy.deepcopy`."""
    kind = type(value)
    if kind is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if kind is list:
        return [copy_json(item) for item in value]
    if kind in _SCALARS or value is None:
        return value
    return copy.deepcopy(value)


_SCALARS = frozenset({str, int, float, bool})
