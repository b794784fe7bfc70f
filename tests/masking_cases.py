"""The masking cases the inspector's and the API's tests share (workflows.masking is one policy
for both): a table of keys and free text, and a workflow, `leaky`, that records every case
everywhere a run records something (step input, output and meta, state, an event, an attempt's
error, the run's error and result)."""

from __future__ import annotations

from workflows import CriticalError, event, setup, workflow

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

KEY_CASES = [(key, secret) for kind, key, secret in CASES if kind == "key"]
TEXT_CASES = [(text, secret) for kind, text, secret in CASES if kind == "text"]


def value_of(i: int) -> str:
    """The value recorded under key case `i`: unique, so a page can be searched for it."""
    return f"leak{i:03d}value"


def payload() -> dict:
    """Every key case with its own value, and every text case, as one JSON value."""
    return {
        "fields": {key: value_of(i) for i, (key, _secret) in enumerate(KEY_CASES)},
        "texts": [text for text, _secret in TEXT_CASES],
    }


def hidden() -> list[str]:
    """What must never show: the values of secret keys and the secrets in the texts."""
    values = [value_of(i) for i, (_key, secret) in enumerate(KEY_CASES) if secret]
    return values + [secret for _text, secret in TEXT_CASES if secret]


def shown() -> list[str]:
    """What must still show: the values of ordinary keys."""
    return [value_of(i) for i, (_key, secret) in enumerate(KEY_CASES) if not secret]


ERROR_TEXT = "\n".join(text for text, secret in TEXT_CASES if secret)


async def leaky_run(ctx):
    async def record(step):
        step.state["recorded"] = step.input
        step.meta["recorded"] = step.input
        step.broadcast("leak", step.input)
        return step.input

    await ctx.step("record", record, input=payload())

    async def fail(step):
        raise CriticalError(ERROR_TEXT)

    await ctx.step("fail", fail)


registry = setup(use={"leaky": workflow(leaky_run, events={"leak": event()}, version="v1")})


def masked_error_text() -> str:
    from workflows.masking import mask_text

    return mask_text(ERROR_TEXT)
