"""The masking policy (workflows.masking) over the shared cases of tests/masking_cases.py: secrets
never show, and ordinary values (token counts included) do; the inspector's run page of a run that
recorded every case shows none of their secrets (the API's reads: tests/api/test_masking.py)."""

from __future__ import annotations

import copy
import html

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests import masking_cases
from tests.masking_cases import CASES
from workflows import conf
from workflows.masking import MASK, is_secret_key, mask, mask_text, unmask
from workflows.models import Run
from workflows.testing import run_until_idle


@pytest.mark.parametrize(("kind", "given", "secret"), CASES, ids=[f"{k}:{g!r:.40}" for k, g, _ in CASES])
def test_masking_table(kind, given, secret):
    if kind == "key":
        assert is_secret_key(given) is secret
        masked = mask({given: "value-1", "keep": "me"})
        assert masked == {given: MASK if secret else "value-1", "keep": "me"}
        return
    masked = mask_text(given)
    if secret is None:
        assert masked == given
    else:
        assert secret not in masked and MASK in masked
        assert mask({"error": given}) == {"error": masked}  # values are free text too


def test_mask__nested_values_and_whole_subtrees():
    value = {
        "title": "t",
        "headers": {"Authorization": "Bearer abc.def.ghi", "Accept": "application/json"},
        "items": [{"password": "hunter2", "n": 1}, {"api_key": {"id": 3, "value": "k"}}],
        "usage": {"prompt_tokens": 10, "total_tokens": 12},
        "token": None,
    }
    original = copy.deepcopy(value)
    assert mask(value) == {
        "title": "t",
        "headers": {"Authorization": MASK, "Accept": "application/json"},
        "items": [{"password": MASK, "n": 1}, {"api_key": MASK}],
        "usage": {"prompt_tokens": 10, "total_tokens": 12},
        "token": None,  # nothing to hide
    }
    assert value == original  # never modified in place


def test_mask__scalars_pass_through():
    assert mask(3) == 3 and mask(None) is None and mask(True) is True and mask([1, "a"]) == [1, "a"]


def test_unmask__puts_untouched_secrets_back():
    original = {
        "title": "t",
        "password": "hunter2",
        "auth": "Authorization: Bearer abcdefghijk",
        "list": [{"token": "x"}],
    }
    edited = mask(original) | {"title": "new"}
    assert unmask(edited, original) == {**original, "title": "new"}
    assert unmask({"password": "typed-new"}, original) == {"password": "typed-new"}


@pytest.mark.django_db
def test_the_run_page_of_a_run_that_recorded_every_case_shows_no_secret(client, settings):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.masking_cases.registry"]}
    conf.registry.cache_clear()
    run_id = masking_cases.registry.client("leaky").get_or_create(["k"]).run_id
    run_until_idle(masking_cases.registry)
    assert Run.objects.get(id=run_id).status == "failed"

    response = client.get(reverse("admin:workflows_run_inspect", args=[run_id]))

    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    leaked = [secret for secret in masking_cases.hidden() if secret in page]
    assert leaked == []
    assert all(value in page for value in masking_cases.shown())
    assert MASK in page
