"""Run keys: what a valid key is, and the stable text and hash a store finds a key by."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .exceptions import InvalidKey
from .jsonvalue import unstorable


def validate_key(key: Any) -> list[str]:
    """A run key is a non-empty list (or tuple) of strings."""
    if isinstance(key, str) or not isinstance(key, list | tuple):
        raise InvalidKey(f"a run key must be a list of strings, got {type(key).__name__}: {key!r}")
    if not key:
        raise InvalidKey("a run key must hold at least one string")
    bad = [k for k in key if not isinstance(k, str)]
    if bad:
        raise InvalidKey(f"a run key must be a list of strings; {bad[0]!r} is a {type(bad[0]).__name__}")
    problem = unstorable(key)  # NUL or a lone surrogate: PostgreSQL could not store the key
    if problem is not None:
        raise InvalidKey(f"a run key {problem}")
    return list(key)


def key_identity(key: list[str]) -> tuple[str, str]:
    """(the key as compact JSON text, its sha256): the text is searchable, the hash is unique."""
    text = json.dumps(key, separators=(",", ":"), ensure_ascii=False)
    return text, hashlib.sha256(text.encode()).hexdigest()


def quoted(value: Any) -> str:
    """A run id or key as it reads in a message: JSON text (`"abc"`, `["job-1"]`), never a Python
    repr (`'abc'`, `['job-1']`), so an error answered over HTTP reads the same as the request."""
    return json.dumps(value, ensure_ascii=False)
