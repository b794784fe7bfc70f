"""The CRM client: look a company up by name (`GET {CRM_API_URL}/companies?name=…`).

The CRM's contract: a 2xx answers ONE company object, `{"name", "plan", "seats"}` (a list of such
objects is accepted too, the exact name preferred); 404 means no company of that name; any other
non-2xx is a failure (429/5xx retried, other 4xx critical, as `http.raise_for_status` sorts them).
"""

from __future__ import annotations

from typing import Any

import httpx2
from django.conf import settings

from .http import InvalidReply, calling, json_body, raise_for_status

NOT_FOUND = 404


async def find_company(client: httpx2.AsyncClient, name: str) -> dict[str, Any] | None:
    """The CRM's record of the company named `name`, or None when the CRM has none (404)."""
    url = settings.CRM_API_URL.rstrip("/") + "/companies"
    with calling("CRM"):
        response = await client.get(url, params={"name": name})
    if response.status_code == NOT_FOUND:
        return None
    raise_for_status(response, "CRM")
    data = json_body(response, "CRM")
    records = [data] if isinstance(data, dict) else data
    if not isinstance(records, list) or not all(_is_company(r) for r in records):
        raise InvalidReply(f"CRM returned no company object: {str(data)[:200]}")
    exact = [r for r in records if str(r["name"]).casefold() == name.casefold()]
    return (exact or records or [None])[0]


def _is_company(record: Any) -> bool:
    return isinstance(record, dict) and isinstance(record.get("name"), str)
