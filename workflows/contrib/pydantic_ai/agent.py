"""`DurableAgent`: a pydantic-ai `Agent` run inside a workflow, each model request and tool call a
recorded step, so a run that crashes mid-conversation resumes without asking the model again.

    from pydantic_ai import Agent
    from workflows.contrib.pydantic_ai import DurableAgent

    support = DurableAgent(Agent("openai:gpt-4o-mini", tools=[lookup_order]), name="support")

    async def run(ctx):
        question = (await ctx.queue.next("wait-question", names=["question"])).body
        result = await support.run(ctx, question["text"])
        return result.output

The agent's own code (its graph, output validation, history) runs in the workflow body and is
replayed on every resume; only the model and the tools touch the outside world, and they do it
in steps. Tool calls run one at a time, in the order the model asked for them (pydantic-ai's
`sequential` mode), so each call's position in the history is the same on every replay.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models import Model, infer_model

from ...core.exceptions import BadInput
from ...core.streams import check_name as check_stream_name
from .approvals import APPROVAL_QUEUE
from .model import StepModel
from .toolset import ToolPolicy, wrap_toolsets
from .turns import Turns

# Model calls are slow and rate limited: a long timeout, patient retries (4 s, 8 s ... 60 s).
MODEL_STEP: dict[str, Any] = {
    "timeout": 120,
    "retry_on_timeout": True,
    "max_retries": 6,
    "retry_backoff_base": 2.0,
    "retry_backoff_max": 60.0,
}
STEP_OPTIONS = frozenset(
    {"timeout", "retry_on_timeout", "max_retries", "retry_backoff_base", "retry_backoff_max", "limit"}
)


class DurableAgent:
    """A pydantic-ai `Agent` whose runs are durable (see the module).

    `name` prefixes the run's history entries (`<name>:turn-<n>:model`, ...); keep it stable across
    deploys, as a step name. `model_step` and `tool_step` are `ctx.step` options (`timeout`,
    `max_retries`, `retry_backoff_base`, `retry_backoff_max`, `retry_on_timeout`, `limit`) of the
    model requests and of the tool calls; `tool_steps` overrides them per tool name. A model
    setting `timeout` or a tool's own `timeout` sets the step's timeout when the options give
    none. `approve` names tools that wait for an operator's decision on `approval_queue` (tools
    declared with `requires_approval=True` always do); with `approval_timeout` (seconds) a call
    nobody decides on in time is refused. `stream` (a name, or True for the agent's name) writes
    each model turn's text to that stream of the run as the model writes it (`step.stream`;
    readers: `handle.stream(name)`, Server-Sent Events, the run page); the recorded responses
    stay whole.
    """

    def __init__(
        self,
        agent: Agent[Any, Any],
        *,
        name: str,
        model_step: Mapping[str, Any] | None = None,
        tool_step: Mapping[str, Any] | None = None,
        tool_steps: Mapping[str, Mapping[str, Any]] | None = None,
        approve: Iterable[str] = (),
        approval_queue: str = APPROVAL_QUEUE,
        approval_timeout: float | None = None,
        stream: str | bool | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise BadInput(f"DurableAgent wraps a pydantic_ai.Agent, not {type(agent).__name__}")
        if not isinstance(name, str) or not name.strip() or ":" in name:
            raise BadInput(f"a durable agent needs a name (no ':'), not {name!r}")
        self.agent = agent
        self.name = name
        self.model_step = {**MODEL_STEP, **_checked("model_step", model_step)}
        self.tool_step = _checked("tool_step", tool_step)
        self.tool_steps = {
            tool: _checked(f"tool_steps[{tool!r}]", o) for tool, o in (tool_steps or {}).items()
        }
        self.approve = frozenset(approve)
        self.approval_queue = approval_queue
        self.approval_timeout = approval_timeout
        self.stream = name if stream is True else (stream or None)
        if self.stream is not None:
            check_stream_name(self.stream)

    async def run(
        self,
        ctx: Any,
        user_prompt: str | Sequence[Any] | None = None,
        *,
        name: str | None = None,
        model: Model | str | None = None,
        **kwargs: Any,
    ) -> Any:
        """`agent.run(user_prompt, **kwargs)` inside the workflow body `ctx`, durably; returns
        pydantic-ai's `AgentRunResult`. `name` replaces the agent's name for this run's entries
        (two runs of one agent in one workflow need two names). Other keyword arguments
        (`deps`, `message_history`, `model_settings`, `usage_limits`, `output_type`, ...) go to
        `Agent.run` unchanged; `event_stream_handler` is refused (stream to readers with
        `DurableAgent(..., stream=...)`)."""
        if kwargs.get("event_stream_handler") is not None:
            raise BadInput(
                "a durable agent takes no event_stream_handler: DurableAgent(..., stream=name) writes"
                " each model turn's text to the run's stream `name`"
            )
        turns = Turns(name or self.name)
        agent = self.agent
        chosen = model if model is not None else agent.model
        if chosen is None:
            raise BadInput(f"agent {turns.name!r} has no model: give Agent(model) or run(..., model=)")
        step_model = StepModel(infer_model(chosen), turns, ctx.step, self.model_step, self.stream)
        policy = ToolPolicy(
            ctx=ctx,
            turns=turns,
            options=self.tool_step,
            per_tool=self.tool_steps,
            approve=self.approve,
            approval_queue=self.approval_queue,
            approval_timeout=self.approval_timeout,
        )
        toolsets = wrap_toolsets(list(agent.toolsets), policy)
        with ExitStack() as stack:
            # The agent's own toolsets, wrapped, replace it: `tools=[]` empties its function toolset,
            # whose tools the wrapped list already holds. Context variables: other runs see none of it.
            stack.enter_context(agent.override(model=step_model, tools=[], toolsets=toolsets))
            stack.enter_context(Agent.parallel_tool_call_execution_mode("sequential"))
            return await agent.run(user_prompt, **kwargs)


def _checked(what: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    options = dict(options or {})
    unknown = set(options) - STEP_OPTIONS
    if unknown:
        raise BadInput(f"{what}: unknown step options {sorted(unknown)}; use {sorted(STEP_OPTIONS)}")
    return options
