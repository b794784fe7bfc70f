"""A pydantic-ai `Agent` run durably inside a workflow: each model request and each tool call is a
recorded step; tools that need approval wait for an operator's decision on a queue.

Needs `pydantic-ai-slim` (the `pydantic-ai` extra of this package). See docs/agents.md.
"""

from .agent import MODEL_STEP, DurableAgent
from .approvals import APPROVAL_QUEUE, PENDING_KEY, ToolApproval, approval_queue

__all__ = ["APPROVAL_QUEUE", "MODEL_STEP", "PENDING_KEY", "DurableAgent", "ToolApproval", "approval_queue"]
