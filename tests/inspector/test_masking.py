"""The masking function: secrets never show, and ordinary values (token counts included) do."""

from __future__ import annotations

import copy

import pytest

from inspector.masking import MASK, is_secret_key, mask, mask_text, unmask


@pytest.mark.parametrize(
    "key",
    ["api_key", "API_KEY", "apiKey", "x-api-key", "openai_api_key", "password", "db_password", "Passwd",
     "secret", "client_secret", "token", "access_token", "refreshToken", "Authorization", "auth.token", "cookie"],
)  # fmt: skip
def test_secret_keys(key):
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    ["prompt_tokens", "completion_tokens", "total_tokens", "max_tokens", "keyboard", "monkey", "author",
     "secretary_name", "title", "key", "passage"],
)  # fmt: skip
def test_ordinary_keys(key):
    assert not is_secret_key(key)


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


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("HTTP 401 for Authorization: Bearer sk-abcdefgh12345678", "sk-abcdefgh12345678"),
        ("headers={'authorization': 'Basic dXNlcjpwYXNz'}", "dXNlcjpwYXNz"),
        ("connect failed: password=hunter2 host=db", "hunter2"),
        ('{"api_key": "abcd1234"}', "abcd1234"),
        ("GET /v1?token=abc123&page=2", "abc123"),
        ("key sk-proj-ABCDEFGHIJKLMNOPqrstuv leaked", "sk-proj-ABCDEFGHIJKLMNOPqrstuv"),
        ("Traceback ...\n  client_secret = 's3cr3t-value'\n", "s3cr3t-value"),
    ],
)
def test_mask_text__secrets_in_free_text(text, secret):
    masked = mask_text(text)
    assert secret not in masked and MASK in masked


@pytest.mark.parametrize(
    "text",
    ["used 120 prompt tokens", "tokens: 5", "step 'extract' timed out after 30s", "the secretary signed"],
)
def test_mask_text__ordinary_text_unchanged(text):
    assert mask_text(text) == text


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
