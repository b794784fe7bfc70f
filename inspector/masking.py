"""Secrets never show: values under secret-looking keys, and secrets written into text, are masked
before the inspector or the dashboard renders anything a run recorded.

Pure functions over JSON values (dict, list, str, numbers, None); the input is never modified.

A key is secret when one of its words is `password`, `passwd`, `secret`, `token`, `authorization`,
`apikey`, `cookie`, or it holds `api` followed by `key` (`api_key`, `X-Api-Key`, `apiKey`). Words
are split at `_`, `-`, `.`, spaces and camelCase humps. Plural counters such as `prompt_tokens` or
`max_tokens` are not secrets, so a model call's token usage stays readable.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

MASK = "••••••"

_SECRET_WORDS = frozenset(
    {"password", "passwd", "pwd", "secret", "token", "authorization", "apikey", "cookie", "credentials"}
)
_WORD_SPLIT = re.compile(r"[_\-.\s/:]+|(?<=[a-z0-9])(?=[A-Z])")

# Secrets inside free text (error messages, tracebacks, a header pasted into a string).
_TEXT_PATTERNS = [
    # "Authorization: Bearer abc", "authorization=Basic abc": the scheme stays, the credential goes.
    re.compile(r"(?i)(\bauthorization\b[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token)?\s*)([^\s\"',;}]+)"),
    re.compile(r"(?i)(\b(?:bearer|basic)\s+)([A-Za-z0-9\-._~+/]{8,}=*)"),
    # key=value / "key": "value" / key: value for secret-looking keys.
    re.compile(
        r"(?i)((?<![A-Za-z])(?:api[_-]?key|password|passwd|secret|token|client[_-]?secret|cookie)"
        r"(?![A-Za-z])[\"']?\s*[:=]\s*[\"']?)([^\s\"',;}&]+)"
    ),
    # Provider keys that look like keys wherever they appear (OpenAI-style sk-…, GitHub ghp_…).
    re.compile(r"()\b((?:sk|rk|pk)-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,})"),
]


def is_secret_key(key: str) -> bool:
    """Whether a mapping key names a secret (case-insensitive, by its words)."""
    words = [w.lower() for w in _WORD_SPLIT.split(str(key)) if w]
    if any(w in _SECRET_WORDS for w in words):
        return True
    joined = "".join(words)
    if joined in _SECRET_WORDS:
        return True
    return any(a == "api" and b == "key" for a, b in itertools.pairwise(words))


def mask_text(text: str) -> str:
    """Mask credentials written into free text; everything else is left as it was."""
    for pattern in _TEXT_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text


def mask(value: Any) -> Any:
    """A copy of a JSON value with every secret masked (see the module docstring)."""
    if isinstance(value, dict):
        return {k: (MASK if v is not None and is_secret_key(k) else mask(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask(v) for v in value]
    if isinstance(value, str):
        return mask_text(value)
    return value


def unmask(edited: Any, original: Any) -> Any:
    """Put the original secrets back where an edited copy of a masked value still holds the mask,
    so an operator can edit a step's input without ever seeing (or retyping) its secrets."""
    if edited == MASK or (
        isinstance(edited, str) and isinstance(original, str) and edited == mask_text(original)
    ):
        return original
    if isinstance(edited, dict) and isinstance(original, dict):
        return {k: unmask(v, original[k]) if k in original else v for k, v in edited.items()}
    if isinstance(edited, list) and isinstance(original, list) and len(edited) == len(original):
        return [unmask(e, o) for e, o in zip(edited, original, strict=True)]
    return edited
