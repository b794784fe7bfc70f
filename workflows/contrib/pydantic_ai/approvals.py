"""Tool calls an operator approves: the decision queue a durable agent waits on.

A tool declared with pydantic-ai's `requires_approval=True` (or named in `DurableAgent(...,
approve=[...])`) does not run when the model calls it: the run writes the pending call to its state
(`state["pending_tool_call"]`) and waits durably on its approval queue. The queue is an ordinary
decision queue (`approval_queue()`), so the operator dashboard lists the run as awaiting a
decision, the inspector offers Approve / Deny with a note under the pending call, and the API and
`manage.py workflows send` take the same message:

    {"decision": "approve" | "deny", "by": "<who>", "note": "<optional>"}

Approved, the tool runs (a recorded step); denied, the model is told so and the run goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...engine.definition import OPERATOR, QueueSpec, queue

APPROVAL_QUEUE = "tool-approval"  # the queue a DurableAgent waits on unless told another
PENDING_KEY = "pending_tool_call"  # the state key that shows the call awaiting a decision

APPROVAL_CHOICES = {
    "Approve": {"decision": "approve", "by": OPERATOR},
    "Deny": {"decision": "deny", "by": OPERATOR},
}


class ToolApproval(BaseModel):
    """An operator's decision on a pending tool call."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    by: str = Field(min_length=1, max_length=200)
    note: str | None = Field(default=None, max_length=2000)


def approval_queue(shows: Sequence[str] = (PENDING_KEY,)) -> QueueSpec:
    """Declare it in the workflow: `queues={"tool-approval": approval_queue()}`. `shows` names the
    state keys the operator reviews before deciding (the pending call by default)."""
    return queue(ToolApproval, choices=APPROVAL_CHOICES, note="note", shows=tuple(shows))


def pending_call(agent: str, wait: str, tool: str, args: Any) -> dict[str, Any]:
    """What the state shows while a call waits: which agent, which tool, with which arguments."""
    return {"agent": agent, "wait": wait, "tool": tool, "args": args}


def denial_text(body: Any) -> str:
    """What the model is told instead of the tool's result when the call is denied."""
    body = body if isinstance(body, dict) else {}
    text = f"The tool call was denied by {body.get('by') or 'an operator'}."
    return f"{text} Note: {body['note']}" if body.get("note") else text


TIMED_OUT = "The tool call was not approved in time, so it did not run."
