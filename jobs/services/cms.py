"""The CMS client: publish a post (`POST {CMS_API_URL}/posts`), idempotently."""

from __future__ import annotations

from typing import Any

import httpx2
from django.conf import settings

from .http import InvalidReply, calling, json_body, raise_for_status


async def publish_post(
    client: httpx2.AsyncClient, *, title: str, body: str, idempotency_key: str
) -> dict[str, Any]:
    """Create the post, or get the one this key already created: a retry after a lost response
    publishes nothing new. Returns the CMS's post (with at least `id` and `url`)."""
    url = settings.CMS_API_URL.rstrip("/") + "/posts"
    with calling("CMS"):
        response = await client.post(
            url, json={"title": title, "body": body}, headers={"Idempotency-Key": idempotency_key}
        )
    raise_for_status(response, "CMS")
    post = json_body(response, "CMS")
    if not isinstance(post, dict) or "url" not in post:
        raise InvalidReply(f"CMS returned no post url: {str(post)[:200]}")
    return post
