"""What model calls used and cost: the tokens steps record in `step.meta["usage"]`, by the model
`step.meta["gen_ai"]` names, priced by a table of USD per million tokens (the setting
`WORKFLOWS["MODEL_PRICES"]`). Pure: the pages and the API add up records they read elsewhere.

Usage shapes (OpenAI's): `prompt_tokens` / `completion_tokens`, or `input_tokens` /
`output_tokens`; `total_tokens` alone is a count that cannot be split, so it is shown but never
priced. The model is `gen_ai["response_model"]` (what answered), else `gen_ai["request_model"]`;
a step with usage and no model counts under "unknown model", tokens only.

A model finds its price by its exact name first, then by the longest priced name it starts with
when the rest is a dated or numbered snapshot: a separator (`-`, `@` or `:`) and a digit, so
`gpt-4o-mini-2024-07-18` costs what `gpt-4o-mini` costs, and `gpt-4o-mini` never takes the price
of `gpt-4o`. The response model is tried first, then the request model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

PER_TOKENS = 1_000_000  # prices are USD per million tokens
PRICE_KINDS = ("input", "output")

# The usage shapes of OpenAI chat completions (prompt/completion) and of the newer APIs (input/output).
TOKEN_KEYS = {
    "prompt": ("prompt_tokens", "input_tokens"),
    "completion": ("completion_tokens", "output_tokens"),
}

_SNAPSHOT = re.compile(r"[-@:][0-9]")  # what follows a priced name in a dated model's name


def tokens_of(usage: Any) -> dict[str, int]:
    """Token counts by kind from a step's recorded `meta["usage"]`: `{"prompt_tokens",
    "completion_tokens", ...}` (or `input_tokens` / `output_tokens`); `total_tokens` counts as
    `total` only when the usage is not split. Anything else (not a dict, not counts) is none."""
    if not isinstance(usage, Mapping):
        return {}
    found: dict[str, int] = {}
    for kind, keys in TOKEN_KEYS.items():
        counts = [n for n in (_count(usage.get(key)) for key in keys) if n is not None]
        if counts:
            found[kind] = counts[0]
    total = _count(usage.get("total_tokens"))
    if not found and total is not None:
        found["total"] = total
    return found


def _count(value: Any) -> int | None:
    """A positive token count, or None (a bool, a string or a negative number is none)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def model_names(meta: Any) -> tuple[str | None, str | None]:
    """(response model, request model) named by a step's `meta["gen_ai"]`, each None when absent."""
    gen_ai = meta.get("gen_ai") if isinstance(meta, Mapping) else None
    if not isinstance(gen_ai, Mapping):
        return None, None
    return _name(gen_ai.get("response_model")), _name(gen_ai.get("request_model"))


def _name(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


# --- prices -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    """USD per million tokens read (input, the prompt) and written (output, the completion)."""

    input: float
    output: float

    def cost(self, prompt: int, completion: int) -> float:
        return (prompt * self.input + completion * self.output) / PER_TOKENS


@dataclass(frozen=True)
class PriceTable:
    """Prices by model name (WORKFLOWS["MODEL_PRICES"])."""

    prices: Mapping[str, Price] = field(default_factory=dict)

    @classmethod
    def from_setting(cls, raw: Any) -> PriceTable:
        """From `{"gpt-4o-mini": {"input": 0.15, "output": 0.6}, ...}` (None or {}: no prices).
        Raises ValueError naming the bad model or value (the system check reports it)."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ValueError(f"must be a dict of prices by model name, not {type(raw).__name__}")
        prices: dict[str, Price] = {}
        for model, price in raw.items():
            if not isinstance(model, str) or not model.strip():
                raise ValueError(f"has a model name that is not a non-empty string: {model!r}")
            prices[model.strip()] = _price(model, price)
        return cls(prices)

    def find(self, model: str | None) -> tuple[str, Price] | None:
        """The priced name and price of `model`: its own, else the longest priced name it is a
        dated snapshot of (see the module's docstring); None when it has none."""
        if model is None:
            return None
        if model in self.prices:
            return model, self.prices[model]
        best: str | None = None
        for name in self.prices:
            if model.startswith(name) and _SNAPSHOT.match(model, len(name)):
                if best is None or len(name) > len(best):
                    best = name
        return (best, self.prices[best]) if best is not None else None

    def price_of(self, meta: Any) -> tuple[str, Price] | None:
        """The price of the model a step's meta names: its response model's, else its request model's."""
        for model in model_names(meta):
            found = self.find(model)
            if found is not None:
                return found
        return None


def _price(model: str, price: Any) -> Price:
    if not isinstance(price, Mapping):
        raise ValueError(
            f'prices {model!r} as {price!r}: give {{"input": USD, "output": USD}} per million tokens'
        )
    unknown = sorted(str(k) for k in price if k not in PRICE_KINDS)
    missing = [k for k in PRICE_KINDS if k not in price]
    if unknown or missing:
        wrong = (f"unknown key(s) {', '.join(unknown)}" if unknown else "") or f"no {', '.join(missing)}"
        raise ValueError(f'prices {model!r} with {wrong}: the keys are "input" and "output"')
    for kind in PRICE_KINDS:
        value = price[kind]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ValueError(
                f"prices {model!r} {kind} at {value!r}: a price is a number of USD per million tokens, 0 or more"
            )
    return Price(input=float(price["input"]), output=float(price["output"]))


# --- adding up ----------------------------------------------------------------------------------


@dataclass
class ModelUsage:
    """What the calls of one model (or of one step) used and, when priced, cost."""

    model: str | None  # as recorded (None: no model named)
    calls: int = 0  # entries with usage
    prompt: int = 0
    completion: int = 0
    unsplit: int = 0  # `total_tokens` of usage that was not split: never priced
    cost: float | None = None  # USD of the priced calls; None when none was priced
    priced_as: str | None = None  # the price table's name that priced it
    unpriced: int = 0  # tokens no price covers (an unknown model's, an unsplit count)

    @property
    def tokens(self) -> int:
        return self.prompt + self.completion + self.unsplit

    def add(self, tokens: Mapping[str, int], price: tuple[str, Price] | None) -> None:
        self.calls += 1
        prompt, completion, total = (
            tokens.get("prompt", 0),
            tokens.get("completion", 0),
            tokens.get("total", 0),
        )
        self.prompt += prompt
        self.completion += completion
        self.unsplit += total
        if price is None:
            self.unpriced += prompt + completion + total
            return
        self.priced_as = price[0]
        self.cost = (self.cost or 0.0) + price[1].cost(prompt, completion)
        self.unpriced += total


@dataclass
class CostSummary:
    """Usage added up by model and by step, with the total cost of what was priced."""

    by_model: list[ModelUsage]  # the most tokens first
    by_step: list[ModelUsage]  # `model` holds the step's name; in the order given
    total: ModelUsage  # everything; `model` is None

    @property
    def cost(self) -> float | None:
        return self.total.cost

    @property
    def complete(self) -> bool:
        """Every token recorded is priced (otherwise `cost` is a lower bound)."""
        return self.total.unpriced == 0

    def __bool__(self) -> bool:
        return self.total.calls > 0


def summarize(records: Iterable[tuple[str, Any]], prices: PriceTable) -> CostSummary:
    """Adds up `(step name, meta)` records: each meta with usage counts once, under its model and
    under its step (steps of one name add up, in the order first seen)."""
    models: dict[str | None, ModelUsage] = {}
    steps: dict[str, ModelUsage] = {}
    total = ModelUsage(model=None)
    for step, meta in records:
        tokens = tokens_of(meta.get("usage")) if isinstance(meta, Mapping) else {}
        if not tokens:
            continue
        response, request = model_names(meta)
        model = response or request
        price = prices.price_of(meta)
        for line in (
            models.setdefault(model, ModelUsage(model=model)),
            steps.setdefault(step, ModelUsage(model=step)),
            total,
        ):
            line.add(tokens, price)
    by_model = sorted(models.values(), key=lambda u: (-u.tokens, u.model or ""))
    return CostSummary(by_model=by_model, by_step=list(steps.values()), total=total)


def format_usd(cost: float | None) -> str:
    """A cost as shown: cents from a dollar up, four decimals below, `<$0.0001` for less."""
    if cost is None:
        return "—"
    if cost >= 1:
        return f"${cost:,.2f}"
    if cost == 0 or cost >= 0.0001:
        return f"${cost:.4f}"
    return "<$0.0001"


__all__ = [
    "PER_TOKENS",
    "CostSummary",
    "ModelUsage",
    "Price",
    "PriceTable",
    "format_usd",
    "model_names",
    "summarize",
    "tokens_of",
]
