"""The masking function: secrets never show, and ordinary values (token counts included) do."""

from __future__ import annotations

import copy

import pytest

from inspector.masking import MASK, is_secret_key, mask, mask_text, unmask

# One table for keys and free text. A key case: ("key", key, secret?). A text case: ("text",
# text, the secret that must go, or None: the text must come back unchanged).
CASES = [
    # secret keys, by word, pair or joined words, in any case and style
    *[("key", k, True) for k in [
        "api_key", "API_KEY", "apiKey", "x-api-key", "openai_api_key", "password", "db_password", "Passwd",
        "secret", "client_secret", "token", "access_token", "refreshToken", "Authorization", "auth.token",
        "cookie", "private_key", "privateKey", "PRIVATEKEY", "ssh-private-key", "passphrase", "key_passphrase",
        "session_id", "sessionId", "sessionID", "SESSIONID", "jwt", "id_jwt", "otp", "otp_code", "pin", "PIN",
        "pin_code", "pinCode", "ssn", "customer_ssn", "card_number", "cardNumber", "CardNumber", "auth",
        "x-auth", "basic_auth", "creds", "db_creds", "credential", "credentials", "Pass-Word",
    ]],
    # ordinary keys: whole words only, token counters readable
    *[("key", k, False) for k in [
        "prompt_tokens", "completion_tokens", "total_tokens", "max_tokens", "keyboard", "monkey", "author",
        "authored_by", "co-author", "secretary_name", "title", "key", "passage", "pinned", "spinner",
        "is_pinned", "pinyin", "session", "session_count", "card", "number", "private", "opinion",
        "tokenizer", "passport_country",
    ]],
    # free text: the secret goes
    ("text", "HTTP 401 for Authorization: Bearer sk-abcdefgh12345678", "sk-abcdefgh12345678"),
    ("text", "headers={'authorization': 'Basic dXNlcjpwYXNz'}", "dXNlcjpwYXNz"),
    ("text", "connect failed: password=hunter2 host=db", "hunter2"),
    ("text", '{"api_key": "abcd1234"}', "abcd1234"),
    ("text", "GET /v1?token=abc123&page=2", "abc123"),
    ("text", "key sk-proj-ABCDEFGHIJKLMNOPqrstuv leaked", "sk-proj-ABCDEFGHIJKLMNOPqrstuv"),
    ("text", "Traceback ...\n  client_secret = 's3cr3t-value'\n", "s3cr3t-value"),
    ("text", "could not connect to postgres://app:pa55word@db.internal:5432/prod", "pa55word"),
    ("text", "redis://:r3dis-pw@cache:6379/0 refused", "r3dis-pw"),
    ("text", "broker amqp://guest:p@ss@rabbit/ down", "p@ss"),
    ("text", "DATABASE_URL='mysql://root:toor@localhost/db'", "toor"),
    ("text", "private_key=-----BEGIN-KEY-abc", "-----BEGIN-KEY-abc"),
    ("text", '{"passphrase": "correct horse battery"}', "correct horse battery"),
    ("text", "login failed: session_id=9f8e7d6c", "9f8e7d6c"),
    ("text", "sessionId: 'abc-123'", "abc-123"),
    ("text", "verify jwt=eyJhbGciOiJIUzI1NiJ9.e30.sig", "eyJhbGciOiJIUzI1NiJ9.e30.sig"),
    ("text", "otp: 493021 expired", "493021"),
    ("text", "pin=0420 rejected", "0420"),
    ("text", "ssn: 123-45-6789 on file", "123-45-6789"),
    ("text", "card_number=4111 1111 1111 1111 declined", "1111 1111"),
    ("text", "X-Auth: deadbeefcafe", "deadbeefcafe"),
    ("text", "auth=admin:letmein", "admin:letmein"),
    ("text", "creds: s3cr3tpair", "s3cr3tpair"),
    ("text", "error: {\"detail\": \"password=hunter2\"}", "hunter2"),
    # free text: nothing to hide, nothing changed
    ("text", "used 120 prompt tokens", None),
    ("text", "tokens: 5", None),
    ("text", "step 'extract' timed out after 30s", None),
    ("text", "the secretary signed", None),
    ("text", "pinned: true, spinner=3, opinion: fine", None),
    ("text", "author: Ann Lee; authored_by=ann", None),
    ("text", "GET https://api.example.com:8443/v1/items?page=2 -> 503", None),
    ("text", "see http://user@example.com/path and https://example.com/a@b", None),
    ("text", "session: 42 minutes, card: visa", None),
]  # fmt: skip


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
