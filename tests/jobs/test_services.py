"""The model, CRM and CMS clients over httpx2.MockTransport: what each HTTP answer becomes."""

from __future__ import annotations

import datetime as dt
import json

import httpx2
import pytest

from jobs import prompts
from jobs.services import cms, crm, model
from jobs.services.http import InvalidReply, ServiceUnavailable, retry_after_seconds
from workflows import CriticalError, RetryAfter

pytestmark = pytest.mark.usefixtures("service_settings")


@pytest.fixture
def service_settings(settings):
    settings.OPENAI_BASE_URL = "http://model.test/v1/"
    settings.OPENAI_API_KEY = "sk-test"
    settings.OPENAI_MODEL = "gpt-test"
    settings.CRM_API_URL = "http://crm.test"
    settings.CMS_API_URL = "http://cms.test/api"


def client_answering(*responses: httpx2.Response | Exception, seen: list | None = None) -> httpx2.AsyncClient:
    answers = list(responses)

    def handle(request: httpx2.Request) -> httpx2.Response:
        if seen is not None:
            seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handle))


def completion(content: str, usage: dict | None = None) -> httpx2.Response:
    body = {"choices": [{"message": {"role": "assistant", "content": content}}], "usage": usage}
    return httpx2.Response(200, json=body)


async def test_model__sends_openai_chat_completion_and_returns_content_and_usage():
    seen: list[httpx2.Request] = []
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    async with client_answering(completion("hello", usage), seen=seen) as client:
        result = await model.complete(client, [{"role": "user", "content": "hi"}], json_object=True)
    assert (result.content, result.usage) == ("hello", usage)
    (request,) = seen
    assert str(request.url) == "http://model.test/v1/chat/completions"
    assert request.headers["Authorization"] == "Bearer sk-test"
    assert json.loads(request.content) == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_object"},
    }


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_model__429_and_5xx_without_retry_after_are_plain_retryable_errors(status):
    async with client_answering(httpx2.Response(status, text="busy")) as client:
        with pytest.raises(ServiceUnavailable, match=f"^model returned {status}$"):
            await model.complete(client, [])


@pytest.mark.parametrize("status", [429, 503])
async def test_model__retry_after_header_sets_the_wait(status):
    response = httpx2.Response(status, headers={"Retry-After": "7"})
    async with client_answering(response) as client:
        with pytest.raises(RetryAfter) as caught:
            await model.complete(client, [])
    assert caught.value.seconds == 7
    assert str(caught.value) == f"model returned {status}"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_model__other_4xx_are_critical_and_carry_the_response_text(status):
    response = httpx2.Response(status, json={"error": {"message": "Incorrect API key provided"}})
    async with client_answering(response) as client:
        with pytest.raises(CriticalError, match=f"model returned {status}: .*Incorrect API key provided"):
            await model.complete(client, [])


async def test_model__a_body_that_is_not_json_is_an_invalid_reply():
    async with client_answering(httpx2.Response(200, text="<html>oops")) as client:
        with pytest.raises(InvalidReply, match="model returned invalid JSON"):
            await model.complete(client, [])


async def test_model__a_reply_without_content_is_an_invalid_reply():
    async with client_answering(httpx2.Response(200, json={"choices": []})) as client:
        with pytest.raises(InvalidReply, match="no message content"):
            await model.complete(client, [])


async def test_model__network_errors_are_retryable():
    error = httpx2.ConnectError("refused")
    async with client_answering(error) as client:
        with pytest.raises(ServiceUnavailable, match="model unreachable"):
            await model.complete(client, [])


async def test_crm__looks_the_company_up_by_name_and_prefers_the_exact_match():
    seen: list[httpx2.Request] = []
    records = [{"name": "Acme Corporation"}, {"name": "acme corp", "plan": "business"}]
    async with client_answering(httpx2.Response(200, json=records), seen=seen) as client:
        found = await crm.find_company(client, "Acme Corp")
    assert found == {"name": "acme corp", "plan": "business"}
    assert str(seen[0].url) == "http://crm.test/companies?name=Acme+Corp"


async def test_crm__no_match_is_none_and_500_is_retryable():
    async with client_answering(httpx2.Response(200, json=[])) as client:
        assert await crm.find_company(client, "Nobody Inc") is None
    async with client_answering(httpx2.Response(404, json={"error": "no such company"})) as client:
        assert await crm.find_company(client, "Nobody Inc") is None
    async with client_answering(httpx2.Response(500)) as client:
        with pytest.raises(ServiceUnavailable, match="CRM returned 500"):
            await crm.find_company(client, "Acme Corp")


async def test_cms__posts_with_the_idempotency_key():
    seen: list[httpx2.Request] = []
    post = {"id": 3, "url": "http://cms.test/posts/3"}
    async with client_answering(httpx2.Response(201, json=post), seen=seen) as client:
        assert await cms.publish_post(client, title="T", body="B", idempotency_key="job-1") == post
    (request,) = seen
    assert str(request.url) == "http://cms.test/api/posts"
    assert request.headers["Idempotency-Key"] == "job-1"
    assert json.loads(request.content) == {"title": "T", "body": "B"}


async def test_cms__a_lost_response_is_retryable():
    error = httpx2.RemoteProtocolError("Server disconnected without sending a response.")
    async with client_answering(error) as client:
        with pytest.raises(ServiceUnavailable, match="CMS connection lost"):
            await cms.publish_post(client, title="T", body="B", idempotency_key="job-1")


def test_retry_after__seconds_dates_and_garbage():
    now = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    assert retry_after_seconds("3") == 3
    assert retry_after_seconds("Thu, 01 Jan 2026 12:00:30 GMT", now=now) == 30
    assert retry_after_seconds("Thu, 01 Jan 2026 11:00:00 GMT", now=now) == 0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None


def test_parse_extraction__accepts_the_asked_shape_and_dedupes():
    content = '```json\n{"companies": ["Acme Corp", "acme corp", " "], "actionItems": ["Send it"]}\n```'
    assert prompts.parse_extraction(content) == {"companies": ["Acme Corp"], "actionItems": ["Send it"]}


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[1, 2]",
        '{"companies": "Acme"}',
        '{"companies": [], "actionItems": [1]}',
        '{"companies": []}',
    ],
)
def test_parse_extraction__anything_else_is_an_invalid_reply(content):
    with pytest.raises(InvalidReply):
        prompts.parse_extraction(content)
