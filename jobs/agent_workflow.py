"""The example app's agent workflow: `accountAgent`, a pydantic-ai agent run durably.

A question arrives on the `question` queue; the agent answers it with two tools: `crm_lookup`
(reads the CRM) and `publish_note` (posts to the CMS), which needs an operator's approval first
(`requires_approval=True`: the run waits on its `tool-approval` queue; Approve / Deny in the
inspector, the API or `manage.py workflows send`). Each model request and each tool call is a
recorded step (`workflows.contrib.pydantic_ai`), so a runner that dies mid-conversation costs no
repeated model call, CRM lookup or post.

The model is OpenAI's chat completions at OPENAI_BASE_URL (the offline demo model by default in
the quickstart; it calls the tools a question names, see jobs/demo/tools.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from openai import AsyncOpenAI
from pydantic import BaseModel, ConfigDict, Field
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from jobs.services import cms, crm, http
from workflows import queue, setup, workflow
from workflows.contrib.pydantic_ai import DurableAgent, approval_queue

# CRM and CMS calls: patient retries (4 s, 8 s ... 60 s), as the aiJob's service steps.
TOOL_STEP = {
    "timeout": 30,
    "retry_on_timeout": True,
    "max_retries": 6,
    "retry_backoff_base": 2.0,
    "retry_backoff_max": 60.0,
}


class Question(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=4000)


@dataclass
class AccountDeps:
    run_id: str  # with the model's tool call id, the CMS's idempotency key


account_agent = Agent(
    deps_type=AccountDeps,
    instructions=(
        "You answer questions about customer accounts. Look companies up with crm_lookup. "
        "Publish a note with publish_note only when the user asks for one."
    ),
)


@account_agent.tool
async def crm_lookup(ctx: RunContext[AccountDeps], company: str) -> dict[str, Any]:
    """The CRM's record of a company: its plan and seats, or found=False."""
    async with http.client_for("crm") as client:
        record = await crm.find_company(client, company)
    return {"company": company, "found": record is not None, "crm": record}


@account_agent.tool(requires_approval=True)
async def publish_note(ctx: RunContext[AccountDeps], title: str, body: str) -> dict[str, Any]:
    """Publish a note to the CMS (an operator approves it first)."""
    # The tool call id is recorded with the model's response: a retried or replayed call sends
    # the same key, and the CMS answers with the post it already made.
    key = f"{ctx.deps.run_id}:{ctx.tool_call_id}"
    async with http.client_for("cms") as client:
        post = await cms.publish_post(client, title=title, body=body, idempotency_key=key)
    return {"postId": post.get("id"), "url": post["url"]}


# stream=True: each model turn's text goes to the run's stream "account" as it comes (the run page shows it).
durable_account_agent = DurableAgent(account_agent, name="account", tool_step=TOOL_STEP, stream=True)


def openai_client() -> AsyncOpenAI:
    """The OpenAI client from the settings. It does not retry: the step does, with its backoff,
    and the attempts are on record."""
    return AsyncOpenAI(
        base_url=settings.OPENAI_BASE_URL, api_key=settings.OPENAI_API_KEY or "demo", max_retries=0
    )


async def account_agent_run(ctx) -> dict[str, Any]:
    question = (await ctx.queue.next("wait-question", names=["question"])).body["question"]
    ctx.state["question"] = question  # commits with the first model step
    async with openai_client() as client:
        model = OpenAIChatModel(settings.OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))
        result = await durable_account_agent.run(
            ctx, question, deps=AccountDeps(run_id=ctx.run_id), model=model
        )
    return await ctx.step("record-answer", record_answer, input=result.output)


def record_answer(step) -> dict[str, Any]:
    step.state["answer"] = step.input
    return {"answer": step.input}


account_agent_workflow = workflow(
    account_agent_run,
    state=lambda: {"question": None, "answer": None, "pending_tool_call": None},
    queues={
        "question": queue(Question),
        "tool-approval": approval_queue(shows=("question", "pending_tool_call")),
    },
    actions={"answer": lambda c: c.state.get("answer")},
    labels=("question",),
    calls_out={
        "account:*:model": "ask the model for the agent's next turn",
        "account:*:tool:crm_lookup*": "look the company up in the CRM",
        "account:*:tool:publish_note*": "post the note to the CMS",
    },
)

registry = setup(use={"accountAgent": account_agent_workflow})
