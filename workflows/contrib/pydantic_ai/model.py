"""The model side of a durable agent: each model request is one recorded step.

`StepModel` wraps the agent's model for one `DurableAgent.run`. Its `request` is
`ctx.step("<agent>:turn-<n>:model", ...)`: the first time it calls the real model and records the
response as JSON (pydantic-ai's `ModelMessagesTypeAdapter`), with its token usage in
`step.meta["usage"]` and the model names in `step.meta["gen_ai"]`, where the token metrics, the
traces and `Limiter(tokens_per_minute=)` read them; on replay it returns the recorded response and
the model is not called. With a stream (`DurableAgent(..., stream="name")`) the step asks the
model for a streamed response and writes its text to the run's stream `name` as it comes; the
step still records the whole response, so a replay is the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext as AgentContext

from ...core.exceptions import CriticalError, RetryAfter, WorkflowError
from .turns import Turns

# 4xx answers a retry cannot fix (a bad request, a bad key, an unknown model): the step fails at
# once. 408 (timeout), 409 (conflict) and 429 (rate limit) are worth another attempt.
RETRYABLE_4XX = frozenset({408, 409, 429})


def dump_response(response: ModelResponse) -> dict[str, Any]:
    """A model response as the JSON a step records."""
    return ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]


def load_response(data: Any) -> ModelResponse:
    """The response a step recorded, rebuilt; a recorded value that is not a response is an error."""
    (message,) = ModelMessagesTypeAdapter.validate_python([data])
    if not isinstance(message, ModelResponse):
        raise WorkflowError(f"a recorded model step holds a {type(message).__name__}, not a ModelResponse")
    return message


def dump_request(messages: list[ModelMessage]) -> Any:
    """What a model step shows as its input: the newest message (the prompt or the tool results
    this turn answers), not the whole conversation the model is sent again each turn."""
    return ModelMessagesTypeAdapter.dump_python(messages[-1:], mode="json") if messages else []


def usage_meta(response: ModelResponse) -> dict[str, int]:
    usage = response.usage
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def gen_ai_meta(model: Model, response: ModelResponse) -> dict[str, Any]:
    return {
        "operation": "chat",
        "request_model": model.model_name,
        "response_model": response.model_name or model.model_name,
        "provider": response.provider_name or model.system,
    }


def model_failure(exc: ModelHTTPError) -> Exception:
    """How a provider's HTTP error fails the step: a 4xx that no retry fixes is critical, a
    `Retry-After` header sets the wait before the next attempt, anything else retries."""
    if 400 <= exc.status_code < 500 and exc.status_code not in RETRYABLE_4XX:
        return CriticalError(f"the model refused the request ({exc.status_code}): {exc.body!r}")
    retry_after = (exc.headers or {}).get("retry-after")
    if retry_after:
        try:
            return RetryAfter(float(retry_after))
        except ValueError:
            pass
    return exc


async def streamed_request(
    model: Model,
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    parameters: ModelRequestParameters,
    write: Callable[[str], Awaitable[None]],
) -> ModelResponse:
    """Ask `model` for a streamed response, write its text to the step's stream as it comes
    (`write`), and return the whole response (what the step records)."""
    async with model.request_stream(messages, model_settings, parameters) as streamed:
        async for event in streamed:
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart) and event.part.content:
                await write(event.part.content)
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                if event.delta.content_delta:
                    await write(event.delta.content_delta)
        return streamed.get()


class StepModel(WrapperModel):
    """The agent's model for one durable run: `request` is a recorded step (see the module)."""

    def __init__(
        self,
        wrapped: Model,
        turns: Turns,
        step: Callable[..., Any],
        options: dict[str, Any],
        stream: str | None = None,
    ):
        super().__init__(wrapped)
        self._turns = turns
        self._step = step  # ctx.step of the run
        self._options = options
        self._stream = stream  # the run's stream each turn's text goes to as it comes, if any

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        name = self._turns.next_turn()
        wrapped = self.wrapped

        stream = self._stream

        async def call_model(step: Any) -> dict[str, Any]:
            try:
                if stream is None:
                    response = await wrapped.request(messages, model_settings, model_request_parameters)
                else:
                    writer = step.stream(stream)
                    response = await streamed_request(
                        wrapped, messages, model_settings, model_request_parameters, writer.write
                    )
            except ModelHTTPError as exc:
                raise model_failure(exc) from exc
            step.meta["usage"] = usage_meta(response)
            step.meta["gen_ai"] = gen_ai_meta(wrapped, response)
            return dump_response(response)

        options = dict(self._options)
        timeout = (model_settings or {}).get("timeout")
        if "timeout" not in options and isinstance(timeout, int | float) and timeout > 0:
            options["timeout"] = timeout  # the request's own timeout bounds the step
        recorded = await self._step(f"{name}:model", call_model, dump_request(messages), **options)
        return load_response(recorded)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: AgentContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        raise WorkflowError(
            "a durable agent does not stream: call `await agent.run(ctx, ...)` without "
            "event_stream_handler (each model response is recorded whole)"
        )
        yield  # pragma: no cover - makes this an async generator
