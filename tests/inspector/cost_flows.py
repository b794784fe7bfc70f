"""Workflows whose steps record model usage, for the cost on the run page, the dashboard and the
API: `drafted` calls two priced models (one by a dated name) and an unpriced one; `tagged` only
an unpriced one."""

from __future__ import annotations

import pytest

from workflows import conf, setup, workflow

PRICES = {"gpt-4o-mini": {"input": 0.15, "output": 0.6}, "gpt-4o": {"input": 2.5, "output": 10}}
# draft: 2000 in, 1000 out at gpt-4o-mini's price = $0.0009; review: 2000 in, 200 out at
# gpt-4o's = $0.007; tag: unpriced. One run of `drafted` costs $0.0079.
RUN_COST = 0.0079


def model_step(model: str, usage: dict, *, request_model: str | None = None):
    def call(step):
        step.meta["usage"] = usage
        step.meta["gen_ai"] = {
            "operation": "chat",
            "request_model": request_model or model,
            "response_model": model,
        }
        return {"model": model}

    return call


async def drafted(ctx):
    draft = model_step("gpt-4o-mini-2024-07-18", {"prompt_tokens": 2000, "completion_tokens": 1000,
                                                  "total_tokens": 3000}, request_model="gpt-4o-mini")  # fmt: skip
    await ctx.step("draft", draft)
    await ctx.step("review", model_step("gpt-4o", {"input_tokens": 2000, "output_tokens": 200}))
    await ctx.step("tag", model_step("local-llm", {"prompt_tokens": 40, "completion_tokens": 2}))
    await ctx.step("plain", lambda step: "no model")
    return "done"


async def tagged(ctx):
    await ctx.step("tag", model_step("local-llm", {"total_tokens": 50}))
    return "done"


registry = setup(use={"drafted": workflow(drafted), "tagged": workflow(tagged)})


@pytest.fixture
def priced_registry(settings):
    """The project serves these workflows with PRICES as WORKFLOWS["MODEL_PRICES"]."""
    settings.WORKFLOWS = {
        **settings.WORKFLOWS,
        "REGISTRIES": ["tests.inspector.cost_flows.registry"],
        "MODEL_PRICES": PRICES,
    }
    conf.registry.cache_clear()
    yield registry
    conf.registry.cache_clear()
