"""The one masking policy. Secrets never show: values under secret-looking keys, and secrets
written into text, are masked before the inspector, the dashboard, a run's WebSocket or the `/api/`
reads (a run with its steps, attempts, state, result and error; its events) show anything a run
recorded. (The example app's `/jobs` state and actions' results are the app's own data: unmasked.)

Pure functions over JSON values (dict, list, str, numbers, None); the input is never modified.

A key is split into words at `_`, `-`, `.`, `/`, `:`, spaces and camelCase humps, and it is secret
when one of its words is a secret word (`password`, `passwd`, `pwd`, `passphrase`, `secret`,
`token`, `authorization`, `auth`, `cookie`, `credential(s)`, `creds`, `jwt`, `otp`, `pin`, `ssn`,
`apikey`, `privatekey`, `sessionid`, `cardnumber`), when two words in a row make a secret pair
(`api key`, `private key`, `session id`, `session key`, `card number`), or when its words joined
are a secret word (`Pass-Word`). Whole words only: `author`, `pinned`, `spinner`, `secretary` and
plural counters such as `prompt_tokens` or `max_tokens` stay readable.

In free text (error messages, tracebacks), a `key=value` / `key: value` / `"key": "value"` whose
key is secret by the same rule loses its value (an `Authorization: Bearer` keeps its scheme), a
URL loses the password of its user info (`postgres://user:••••••@host/db`), and provider keys
that look like keys (`sk-…`, `ghp_…`) go wherever they are.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

MASK = "••••••"

_SECRET_WORDS = frozenset(
    {
        "password", "passwd", "pwd", "passphrase", "secret", "token", "authorization", "auth", "cookie",
        "credential", "credentials", "creds", "jwt", "otp", "pin", "ssn",
        # the pairs below written as one word
        "apikey", "privatekey", "sessionid", "sessionkey", "cardnumber",
    }
)  # fmt: skip
_SECRET_PAIRS = frozenset(
    {("api", "key"), ("private", "key"), ("session", "id"), ("session", "key"), ("card", "number")}
)
_WORD_SPLIT = re.compile(r"[_\-.\s/:]+|(?<=[a-z0-9])(?=[A-Z])")

# Secrets inside free text, each pattern with groups (kept before, secret, kept after).
_AUTH_SCHEME = r"(?:bearer|basic|token|digest)"
_TEXT_PATTERNS = [
    # "Authorization: Bearer abc", "authorization=Basic abc": the scheme stays, the credential goes.
    re.compile(rf"(?i)(\bauthorization\b[\"']?\s*[:=]\s*[\"']?(?:{_AUTH_SCHEME}\s+)?)([^\s\"',;}}]+)()"),
    re.compile(r"(?i)(\b(?:bearer|basic)\s+)([A-Za-z0-9\-._~+/]{8,}=*)()"),
    # The password of a URL's user info: scheme://user:password@host (the user may be empty).
    re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://[^\s:/?#@\"']*:)([^\s/?#\"']+)(@)"),
    # Provider keys that look like keys wherever they appear (OpenAI-style sk-…, GitHub ghp_…).
    re.compile(r"()\b((?:sk|rk|pk)-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,})()"),
]
# key=value, key: value, "key": "value", 'key' = 'two words': masked when the key is secret.
_KEY_VALUE = re.compile(
    rf"(?i)(?<![\w\-.])(?P<key>[A-Za-z][\w\-.]*)(?P<sep>[\"']?\s*[:=]\s*(?:{_AUTH_SCHEME}\s+)?)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|\d+(?:[ -]\d+)+\b|[^\s\"',;}&]+)"  # "4111 1111 …" whole
)


def _words(key: str) -> list[str]:
    return [w.lower() for w in _WORD_SPLIT.split(str(key)) if w]


def is_secret_key(key: str) -> bool:
    """Whether a mapping key names a secret (case-insensitive, by its words; see above)."""
    words = _words(key)
    if any(w in _SECRET_WORDS for w in words) or "".join(words) in _SECRET_WORDS:
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))


def _mask_key_values(text: str) -> str:
    """Mask the value of each `key=value` whose key is secret. A key that is not secret gives up
    only itself: its "value" is searched again (`failed: password=hunter2`)."""
    out, pos = [], 0
    while (match := _KEY_VALUE.search(text, pos)) is not None:
        value = match.group("value")
        # A URL's scheme ("https://…") is no key; a mask already there stays as it is.
        if not is_secret_key(match.group("key")) or value.startswith("//") or MASK in value:
            out.append(text[pos : match.end("sep")])
            pos = match.end("sep")
            continue
        quoted = value[0] in "\"'" and len(value) >= 2
        out.append(text[pos : match.start("value")])
        out.append(f"{value[0]}{MASK}{value[-1]}" if quoted else MASK)
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def mask_text(text: str) -> str:
    """Mask credentials written into free text; everything else is left as it was."""
    for pattern in _TEXT_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK + m.group(3), text)
    return _mask_key_values(text)


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
