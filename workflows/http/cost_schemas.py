"""The `cost` of the API's run read (`GET /api/runs/{id}`): what its model calls used and, where
WORKFLOWS["MODEL_PRICES"] prices them, cost (`workflows.reads.costs`, `workflows.core.costs`)."""

from __future__ import annotations

from ninja import Field, Schema

from ..core.costs import CostSummary, ModelUsage
from ..reads.costs import entries_cost


class UsageOut(Schema):
    calls: int = Field(description="Entries that recorded usage.")
    input_tokens: int = Field(description="Prompt tokens (prompt_tokens or input_tokens).")
    output_tokens: int = Field(description="Completion tokens (completion_tokens or output_tokens).")
    unsplit_tokens: int = Field(
        description="total_tokens of usage not split into input and output: never priced."
    )
    tokens: int = Field(description="All three added up.")
    unpriced_tokens: int = Field(description="Tokens no price covers: an unknown model's, unsplit counts.")
    cost_usd: float | None = Field(description="USD of the priced tokens; null when nothing was priced.")


class ModelUsageOut(UsageOut):
    model: str | None = Field(description="gen_ai's response_model, else request_model; null: not recorded.")
    priced_as: str | None = Field(description="The MODEL_PRICES name that priced it (null: no price).")


class StepUsageOut(UsageOut):
    step: str = Field(description="The step's name (`scope/name` inside a scope).")


class RunCostOut(UsageOut):
    complete: bool = Field(description="Every token is priced: otherwise cost_usd is a lower bound.")
    by_model: list[ModelUsageOut] = Field(description="The most tokens first.")
    by_step: list[StepUsageOut] = Field(description="In history order.")


def _usage(u: ModelUsage) -> dict:
    return {
        "calls": u.calls,
        "input_tokens": u.prompt,
        "output_tokens": u.completion,
        "unsplit_tokens": u.unsplit,
        "tokens": u.tokens,
        "unpriced_tokens": u.unpriced,
        "cost_usd": u.cost,
    }


def run_cost(run) -> dict | None:
    """A run's cost for RunDetailOut, from its prefetched entries (no query of its own); None
    when no entry recorded usage."""
    summary: CostSummary = entries_cost(run.entries.all())
    if not summary:
        return None
    return {
        **_usage(summary.total),
        "complete": summary.complete,
        "by_model": [{**_usage(u), "model": u.model, "priced_as": u.priced_as} for u in summary.by_model],
        "by_step": [{**_usage(u), "step": u.model} for u in summary.by_step],
    }
