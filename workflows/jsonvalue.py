"""Turning values into recordable JSON, with errors that name what failed."""

from __future__ import annotations

import json
from typing import Any

from .exceptions import NotRecordable


def dumps(value: Any, what: str) -> str:
    """Serialize `value` strictly (no NaN, no objects); `what` names the culprit in the error."""
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise NotRecordable(f"{what} is not JSON-serializable: {exc}") from None


def normalize(value: Any, what: str) -> Any:
    """A JSON round trip: the value exactly as a replay will see it (tuples become lists...)."""
    return json.loads(dumps(value, what))
