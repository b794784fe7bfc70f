"""The tool side of a durable agent: each tool call is one recorded step.

`StepToolset` wraps the agent's toolsets for one `DurableAgent.run`. A call is
`ctx.step("<agent>:turn-<n>:tool:<tool>[<i>]", ...)` with the arguments as the step's input and the
result recorded as JSON; on replay the recorded result comes back and the tool does not run. A tool
that asks the model to try again (`ModelRetry`) has that recorded too, so replay asks again the
same way. Tools that need approval wait on the run's approval queue first (`approvals`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.tools import RunContext as AgentContext
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
from pydantic_core import to_jsonable_python

from .approvals import PENDING_KEY, TIMED_OUT, denial_text, pending_call
from .turns import Turns


@dataclasses.dataclass
class ToolPolicy:
    """How one run's tool calls become steps: step options, and which calls wait for approval."""

    ctx: Any  # the workflow's RunContext
    turns: Turns
    options: dict[str, Any]  # step options of every tool call
    per_tool: dict[str, dict[str, Any]]  # tool name -> options that override them
    approve: frozenset[str]  # tool names that need an operator's approval
    approval_queue: str
    approval_timeout: float | None

    def options_for(self, tool: ToolsetTool[Any]) -> dict[str, Any]:
        options = {**self.options, **self.per_tool.get(tool.tool_def.name, {})}
        timeout = tool.tool_def.timeout
        if "timeout" not in options and timeout is not None and timeout > 0:
            options["timeout"] = timeout
        return options


@dataclasses.dataclass
class StepToolset(WrapperToolset[Any]):
    """An agent's toolset whose calls are recorded steps (see the module)."""

    policy: ToolPolicy = dataclasses.field(kw_only=True)

    async def get_tools(self, ctx: AgentContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        # pydantic-ai would end the run to ask for approval; here the call waits inside the run.
        return {
            name: _as_function(tool) if tool.tool_def.kind == "unapproved" else tool
            for name, tool in tools.items()
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: AgentContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        policy = self.policy
        call = policy.turns.next_call(name)
        prefix = policy.turns.prefix
        if _needs_approval(tool, policy):
            refusal = await _await_decision(policy, f"{prefix}:approval:{call}", name, tool_args)
            if refusal is not None:
                return refusal
        wrapped = self.wrapped

        async def call_tool(step: Any) -> dict[str, Any]:
            try:
                result = await wrapped.call_tool(name, tool_args, ctx, tool)
            except ModelRetry as exc:
                return {"retry": exc.message}
            return {"value": to_jsonable_python(result)}

        recorded = await policy.ctx.step(
            f"{prefix}:tool:{call}", call_tool, tool_args, **policy.options_for(tool)
        )
        if "retry" in recorded:
            raise ModelRetry(recorded["retry"])
        return recorded["value"]


def _as_function(tool: ToolsetTool[Any]) -> ToolsetTool[Any]:
    marked = dict(tool.tool_def.metadata or {}, durable_approval=True)
    tool_def = dataclasses.replace(tool.tool_def, kind="function", metadata=marked)
    return dataclasses.replace(tool, tool_def=tool_def)


def _needs_approval(tool: ToolsetTool[Any], policy: ToolPolicy) -> bool:
    return tool.tool_def.name in policy.approve or bool(
        (tool.tool_def.metadata or {}).get("durable_approval")
    )


async def _await_decision(policy: ToolPolicy, wait: str, tool: str, args: dict[str, Any]) -> str | None:
    """Wait for the operator's decision on the call; None when approved, else what the model is told."""
    ctx = policy.ctx
    ctx.state[PENDING_KEY] = pending_call(policy.turns.name, wait, tool, args)  # commits with the wait
    message = await ctx.queue.next(wait, names=[policy.approval_queue], timeout=policy.approval_timeout)
    ctx.state[PENDING_KEY] = None
    if message is None:
        return TIMED_OUT
    body = message.body if isinstance(message.body, dict) else {}
    return None if body.get("decision") == "approve" else denial_text(body)


def wrap_toolsets(toolsets: list[AbstractToolset[Any]], policy: ToolPolicy) -> list[AbstractToolset[Any]]:
    return [StepToolset(toolset, policy=policy) for toolset in toolsets]
