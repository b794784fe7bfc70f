"""API keys: made once and shown once, stored as a sha256, checked in constant time.

A key looks like `wf_<43 url-safe characters>`; its first 8 characters (the prefix) are stored in
clear to find the candidate rows and to let an operator tell keys apart, the rest only as a hash.
The admin (workflows/admin/apikeys.py) and `manage.py workflows apikey ...` create and revoke keys here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.http import HttpRequest
from ninja.security import HttpBearer

from ..core.exceptions import BadInput
from ..models import ApiKey

KEY_MARKER = "wf_"  # makes leaked keys easy to spot (secret scanners, logs)
PREFIX_LENGTH = 8  # characters of the key stored and shown in clear
TOUCH_EVERY = dt.timedelta(seconds=60)  # last_used_at is written at most this often per key


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def create_api_key(name: str) -> tuple[ApiKey, str]:
    """A new key for `name`; returns the row and the key, which is never available again."""
    name = name.strip()
    if not name:
        raise BadInput("an API key needs a name")
    key = KEY_MARKER + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            row = ApiKey.objects.create(
                name=name, prefix=key[:PREFIX_LENGTH], hashed_key=_hash(key), created_at=_now()
            )
    except IntegrityError:
        raise BadInput(f"an API key named {name!r} already exists") from None
    return row, key


def fill_new_key(row: ApiKey) -> str:
    """Give an unsaved row (the admin's add form) a fresh key; returns the key to show once."""
    key = KEY_MARKER + secrets.token_urlsafe(32)
    row.prefix, row.hashed_key, row.created_at = key[:PREFIX_LENGTH], _hash(key), _now()
    return key


def revoke_api_key(name: str) -> ApiKey:
    row = ApiKey.objects.filter(name=name).first()
    if row is None:
        raise BadInput(f"no API key named {name!r}")
    row.revoked = True
    row.save(update_fields=["revoked"])
    return row


def check_api_key(key: str) -> ApiKey | None:
    """The live key matching `key`, or None. Its last use is recorded at most once a minute."""
    if not key.startswith(KEY_MARKER) or len(key) < PREFIX_LENGTH + 8:
        return None
    digest = _hash(key)
    match = None
    for row in ApiKey.objects.filter(prefix=key[:PREFIX_LENGTH]):
        if hmac.compare_digest(row.hashed_key, digest):
            match = row
    if match is None or match.revoked:
        return None
    now = _now()
    if match.last_used_at is None or now - match.last_used_at >= TOUCH_EVERY:
        # Conditional, so concurrent requests of one key write once.
        ApiKey.objects.filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - TOUCH_EVERY), pk=match.pk
        ).update(last_used_at=now)
        match.last_used_at = now
    return match


class ApiKeyAuth(HttpBearer):
    """`Authorization: Bearer <key>`; sets `request.api_key` (and Ninja's `request.auth`)."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        api_key = check_api_key(token.strip())
        if api_key is not None:
            request.api_key = api_key  # type: ignore[attr-defined]  # our own attribute, read by actor()
        return api_key


def actor(request: HttpRequest) -> str:
    """Who an authenticated API request acts as, in the audit log: `api:<key name>`."""
    return f"api:{request.api_key.name}"  # type: ignore[attr-defined]  # set by ApiKeyAuth
