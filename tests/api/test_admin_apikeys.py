"""API keys in the Django admin: the key is shown once, then only its hash is kept."""

from __future__ import annotations

import re

from django.contrib.messages import get_messages

from workflows.http.auth import check_api_key
from workflows.models import ApiKey


def test_admin__adding_a_key_shows_it_once(admin_client):
    response = admin_client.post("/admin/workflows/apikey/add/", {"name": "crm-sync"}, follow=True)

    assert response.status_code == 200
    shown = [str(m) for m in get_messages(response.wsgi_request)] + [response.content.decode()]
    found = re.search(r"\b(wf_[A-Za-z0-9_-]{40,})", " ".join(shown))
    assert found, shown
    key = found.group(1)
    row = ApiKey.objects.get(name="crm-sync")
    assert check_api_key(key) == row
    assert row.hashed_key != key and key not in row.hashed_key

    page = admin_client.get(f"/admin/workflows/apikey/{row.pk}/change/").content.decode()
    assert key not in page and row.prefix in page


def test_admin__revoking_a_key_refuses_it(admin_client):
    admin_client.post("/admin/workflows/apikey/add/", {"name": "crm-sync"}, follow=True)
    row = ApiKey.objects.get()

    response = admin_client.post(
        f"/admin/workflows/apikey/{row.pk}/change/", {"name": "crm-sync", "revoked": "on"}
    )

    assert response.status_code == 302
    assert ApiKey.objects.get().revoked is True


def test_admin__list_shows_prefixes_not_keys(admin_client):
    admin_client.post("/admin/workflows/apikey/add/", {"name": "a"})
    row = ApiKey.objects.get()

    page = admin_client.get("/admin/workflows/apikey/").content.decode()

    assert f"{row.prefix}…" in page and row.hashed_key not in page
