"""Streamed model answers: the demo model's Server-Sent Events, and the model client reading them
(`complete(..., on_text=...)`) in-process (the mock transport) and over a real socket."""

from __future__ import annotations

import dataclasses
import json
import threading
import time

import httpx2
import pytest

from jobs import prompts
from jobs.demo.server import DemoServer
from jobs.demo.services import DROPPED, DemoConfig, DemoRequest, DemoResponse, DemoServices, check_kind
from jobs.demo.streaming import StreamCut
from jobs.demo.transport import mock_transport
from jobs.services import model
from jobs.services.http import InvalidReply, ServiceUnavailable
from workflows import CriticalError, RetryAfter

from .conftest import SAMPLE

COMPANIES = [
    {"name": "Acme Corp", "found": True, "crm": {"name": "Acme Corp", "plan": "business", "seats": 10}}
]
MESSAGES = prompts.summarize_messages("Call", SAMPLE, ["Send the deck", "Book the demo"], COMPANIES)


def chat(services: DemoServices, **extra) -> DemoResponse:
    body = json.dumps({"model": "demo", "messages": MESSAGES, **extra}).encode()
    response = services.handle(DemoRequest("POST", "/v1/chat/completions", body=body))
    assert isinstance(response, DemoResponse)
    return response


def events(response: DemoResponse) -> list[str]:
    assert response.stream is not None
    raw = b"".join(response.stream).decode()
    assert raw.endswith("\n\n")
    return [event.removeprefix("data: ") for event in raw[:-2].split("\n\n")]


def whole_answer() -> dict:
    return json.loads(chat(DemoServices()).body)


# --- the demo model's stream ---------------------------------------------------------------------


def test_demo_stream__the_whole_answer_as_chunks_then_the_finish_the_usage_and_done():
    response = chat(DemoServices(), stream=True, stream_options={"include_usage": True})
    assert (response.status, response.headers["Content-Type"]) == (200, "text/event-stream")
    *chunks, done = events(response)
    assert done == "[DONE]"
    *pieces, finish, usage = (json.loads(chunk) for chunk in chunks)
    whole = whole_answer()
    assert len(pieces) > 10
    assert (
        "".join(p["choices"][0]["delta"]["content"] for p in pieces)
        == (whole["choices"][0]["message"]["content"])
    )
    assert {(p["object"], p["id"], p["model"], p["choices"][0]["finish_reason"]) for p in pieces} == {
        ("chat.completion.chunk", whole["id"], "demo", None)
    }
    assert finish["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert (usage["choices"], usage["usage"]) == ([], whole["usage"])


def test_demo_stream__no_usage_chunk_unless_asked_for():
    *chunks, done = events(chat(DemoServices(), stream=True))
    assert done == "[DONE]"
    assert all(json.loads(chunk)["choices"] for chunk in chunks)


def test_demo_stream__cut_stops_after_n_pieces_and_only_a_stream_can_be_cut():
    services = DemoServices()
    services.script("summarize", ["cut:2", "cut:2"])
    stream = chat(services, stream=True).stream
    assert stream is not None
    assert [json.loads(next(stream)[6:])["choices"][0]["delta"]["content"] for _ in range(2)]
    with pytest.raises(StreamCut, match="cut after 2 pieces"):
        next(stream)
    assert services.handle(
        DemoRequest("POST", "/v1/chat/completions", body=json.dumps({"messages": MESSAGES}).encode())
    ) is DROPPED  # fmt: skip


def test_demo_stream__knobs():
    assert DemoConfig.from_env({"DEMO_TOKEN_MS": "20"}).token_ms == 20.0
    assert DemoConfig.from_env({}).token_ms == 0.0
    assert check_kind("cut:3") == "cut:3"
    for bad in ("cut", "cut:", "cut:x"):
        with pytest.raises(ValueError, match=r"cut:n"):
            check_kind(bad)


# --- the client against the demo model, in-process and over a socket --------------------------------


class Gated(DemoServices):
    """Holds each stream after its first event until `first_seen` is set (by the client's first
    `on_text`), and notes when it made its last event: proof that pieces leave as they are made."""

    def __init__(self, config: DemoConfig) -> None:
        super().__init__(config)
        self.first_seen = threading.Event()
        self.released_by_client: bool | None = None
        self.last_event_at = 0.0

    def handle(self, request):
        result = super().handle(request)
        if isinstance(result, DemoResponse) and result.stream is not None:
            return dataclasses.replace(result, stream=self._gated(result.stream))
        return result

    def _gated(self, stream):
        for index, event in enumerate(stream):
            if index == 1:
                self.released_by_client = self.first_seen.wait(timeout=10)
            self.last_event_at = time.monotonic()
            yield event


@pytest.fixture
def serve(settings):
    """`serve(services)` -> a client that reaches them, in-process or over a socket (the params)."""
    settings.OPENAI_API_KEY, settings.OPENAI_MODEL = "demo-key", "demo"
    servers: list[tuple[DemoServer, threading.Thread]] = []

    def start(services: DemoServices, over: str) -> httpx2.AsyncClient:
        if over == "mock":
            settings.OPENAI_BASE_URL = "http://demo.test/v1"
            return httpx2.AsyncClient(transport=mock_transport(services))
        server = DemoServer(("127.0.0.1", 0), services)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        servers.append((server, thread))
        settings.OPENAI_BASE_URL = f"{server.url}/v1"
        return httpx2.AsyncClient()

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join()


def collector() -> tuple[list[str], model.TextSink]:
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    return pieces, on_text


OVER = pytest.mark.parametrize("over", ["mock", "socket"])


@OVER
async def test_client__pieces_arrive_in_order_and_make_the_whole_answer(serve, over):
    pieces, on_text = collector()
    async with serve(DemoServices(), over) as client:
        streamed = await model.complete(client, MESSAGES, on_text=on_text)
        whole = await model.complete(client, MESSAGES)
    assert len(pieces) > 10
    assert "".join(pieces) == streamed.content == whole.content
    assert streamed.usage == whole.usage and streamed.usage["total_tokens"] > 0
    assert (streamed.request_model, streamed.response_model) == ("demo", "demo")


@OVER
async def test_client__a_cut_stream_is_retryable_after_exactly_its_pieces(serve, over):
    services = DemoServices()
    services.script("model", ["cut:3"])
    pieces, on_text = collector()
    async with serve(services, over) as client:
        with pytest.raises(ServiceUnavailable, match="model connection lost") as caught:
            await model.complete(client, MESSAGES, on_text=on_text)
        assert not isinstance(caught.value, CriticalError)
        assert len(pieces) == 3
        again = await model.complete(client, MESSAGES, on_text=on_text)  # the connection pool is sound
    assert again.content.startswith("".join(pieces[:3]))


@OVER
async def test_client__statuses_before_the_stream_raise_as_unstreamed(serve, over):
    services = DemoServices()
    services.script("model", ["429", "503:2", "401"])
    pieces, on_text = collector()
    async with serve(services, over) as client:
        with pytest.raises(ServiceUnavailable, match=r"^model returned 429$"):
            await model.complete(client, MESSAGES, on_text=on_text)
        with pytest.raises(RetryAfter) as caught:
            await model.complete(client, MESSAGES, on_text=on_text)
        with pytest.raises(CriticalError, match=r"model returned 401: .*scripted 401"):
            await model.complete(client, MESSAGES, on_text=on_text)
    assert caught.value.seconds == 2
    assert pieces == []


@OVER
async def test_client__a_chunk_that_is_not_json_is_an_invalid_reply(serve, over):
    services = DemoServices()
    services.script("model", ["bad-json"])
    pieces, on_text = collector()
    async with serve(services, over) as client:
        with pytest.raises(InvalidReply, match="not JSON"):
            await model.complete(client, MESSAGES, on_text=on_text)
    assert pieces == []


async def test_client__over_a_socket_the_first_piece_arrives_while_the_rest_is_being_made(serve):
    services = Gated(DemoConfig.from_env({"DEMO_TOKEN_MS": "20"}))
    first_at: list[float] = []

    async def on_text(piece: str) -> None:
        if not first_at:
            first_at.append(time.monotonic())
            services.first_seen.set()

    async with serve(services, "socket") as client:
        await model.complete(client, MESSAGES, on_text=on_text)
    returned_at = time.monotonic()
    assert services.released_by_client is True  # the server held the rest until the client had piece 1
    assert first_at[0] < services.last_event_at < returned_at


# --- the client against other servers' streams ------------------------------------------------------


def answering(body: bytes, *, content_type: str = "text/event-stream", seen: list | None = None):
    def handle(request: httpx2.Request) -> httpx2.Response:
        if seen is not None:
            seen.append(request)
        return httpx2.Response(200, headers={"Content-Type": content_type}, content=body)

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handle))


def sse(*data: str) -> bytes:
    return "".join(f"data: {d}\n\n" for d in data).encode()


def delta(content: str) -> str:
    return json.dumps({"model": "gpt-x", "choices": [{"index": 0, "delta": {"content": content}}]})


@pytest.fixture
def openai(settings):
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY, settings.OPENAI_MODEL = "http://m.test/v1", "", "gpt"


async def test_client__asks_for_a_stream_with_usage_and_reads_sse_as_written(openai):
    seen: list[httpx2.Request] = []
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    body = (
        b": keep-alive\n\nevent: chunk\n"
        + sse(delta("Hel"), delta(""), delta("lo"))
        + sse(json.dumps({"choices": [], "usage": usage}), "[DONE]")
    )
    pieces, on_text = collector()
    async with answering(body, seen=seen) as client:
        result = await model.complete(client, [{"role": "user", "content": "hi"}], on_text=on_text)
    assert (pieces, result.content, result.usage, result.response_model) == (
        ["Hel", "lo"], "Hello", usage, "gpt-x",
    )  # fmt: skip
    sent = json.loads(seen[0].content)
    assert (sent["stream"], sent["stream_options"]) == (True, {"include_usage": True})


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (sse(delta("Hel"), delta("lo")), "ended before \\[DONE\\]"),
        (sse(delta("Hel"), json.dumps({"error": {"message": "overloaded"}})), "stream failed: .*overloaded"),
        (sse("[1, 2]"), "not an object"),
        (sse("[DONE]"), "no message content"),
    ],
)
async def test_client__a_broken_stream_is_an_invalid_reply(openai, body, error):
    _, on_text = collector()
    async with answering(body) as client:
        with pytest.raises(InvalidReply, match=error):
            await model.complete(client, [], on_text=on_text)


async def test_client__a_server_that_answers_whole_is_one_piece(openai):
    whole = json.dumps({"choices": [{"message": {"content": "Hello"}}], "usage": {"total_tokens": 1}})
    pieces, on_text = collector()
    async with answering(whole.encode(), content_type="application/json") as client:
        result = await model.complete(client, [], on_text=on_text)
    assert (pieces, result.content, result.usage) == (["Hello"], "Hello", {"total_tokens": 1})
