"""The CRM client: look a company up by name (`GET {CRM_API_URL}/companies?name=…`)."""

from __future__ import annotations

from typing import Any

import httpx
from django.conf import settings

from .http import InvalidReply, calling, json_body, raise_for_status


async def find_company(client: httpx.AsyncClient, name: str) -> dict[str, Any] | None:
    """The CRM's record of the company named `name` (an exact match first), or None."""
    url = settings.CRM_API_URL.rstrip("/") + "/companies"
    with calling("CRM"):
        response = await client.get(url, params={"name": name})
    raise_for_status(response, "CRM")
    data = json_body(response, "CRM")
    records = data.get("companies") if isinstance(data, dict) else data
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InvalidReply(f"CRM returned no list of companies: {str(data)[:200]}")
    exact = [r for r in records if str(r.get("name", "")).casefold() == name.casefold()]
    return (exact or records or [None])[0]
