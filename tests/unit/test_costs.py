"""The cost of model calls alone (workflows.core.costs): usage shapes, which model a step used,
which price a dated model takes, adding up by model and by step, and the refusals of a malformed
price table."""

from __future__ import annotations

import pytest

from workflows.core.costs import Price, PriceTable, format_usd, model_names, summarize, tokens_of

TABLE = PriceTable.from_setting(
    {
        "gpt-4o": {"input": 2.5, "output": 10},
        "gpt-4o-mini": {"input": 0.15, "output": 0.6},
        "claude-3-5-sonnet": {"input": 3, "output": 15},
    }
)


def meta(response=None, request=None, **usage):
    gen_ai = {k: v for k, v in (("response_model", response), ("request_model", request)) if v}
    return {"usage": usage, **({"gen_ai": gen_ai} if gen_ai else {})}


def test_tokens_of__every_usage_shape():
    assert tokens_of({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}) == {
        "prompt": 3,
        "completion": 2,
    }
    assert tokens_of({"input_tokens": 7, "output_tokens": 1}) == {"prompt": 7, "completion": 1}
    assert tokens_of({"total_tokens": 9}) == {"total": 9}
    for junk in (None, [], "12", {"prompt_tokens": "3"}, {"total_tokens": True}, {"input_tokens": -4}):
        assert tokens_of(junk) == {}


def test_model_names__response_then_request():
    assert model_names(meta("gpt-4o-2024-08-06", "gpt-4o")) == ("gpt-4o-2024-08-06", "gpt-4o")
    assert model_names({"gen_ai": {"request_model": " gpt-4o "}}) == (None, "gpt-4o")
    for junk in (
        None,
        {},
        {"gen_ai": "gpt-4o"},
        {"gen_ai": {"response_model": 4}},
        {"gen_ai": {"request_model": ""}},
    ):
        assert model_names(junk) == (None, None)


@pytest.mark.parametrize(
    ("model", "priced_as"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-mini", "gpt-4o-mini"),  # its own price, never gpt-4o's
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),  # the longest name it is a snapshot of
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
        ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
        ("gpt-4o-audio-preview", None),  # another model, not a snapshot
        ("gpt-4", None),
        ("gpt-4omni", None),
        (None, None),
    ],
)
def test_find__exact_then_the_longest_dated_prefix(model, priced_as):
    found = TABLE.find(model)
    assert (found[0] if found else None) == priced_as


def test_price_of__the_response_model_first_then_the_request_model():
    assert TABLE.price_of(meta("gpt-4o-mini-2024-07-18", "gpt-4o"))[0] == "gpt-4o-mini"
    assert TABLE.price_of(meta("my-finetune-7", "gpt-4o"))[0] == "gpt-4o"  # the answerer has no price
    assert TABLE.price_of(meta(None, None, prompt_tokens=1)) is None


def test_price__usd_per_million_tokens():
    assert Price(input=2.5, output=10).cost(2000, 200) == pytest.approx(0.007)


def test_summarize__by_model_and_by_step_with_what_is_priced():
    records = [
        (
            "draft",
            meta("gpt-4o-mini-2024-07-18", prompt_tokens=2000, completion_tokens=1000, total_tokens=3000),
        ),
        ("review", meta("gpt-4o", input_tokens=2000, output_tokens=200)),
        (
            "draft",
            meta("gpt-4o-mini-2024-07-18", prompt_tokens=1000, completion_tokens=0),
        ),  # a replayed record
        ("tag", meta("local-llm", prompt_tokens=40, completion_tokens=2)),
        ("count", meta(None, total_tokens=50)),  # no model named, usage not split
        ("plain", {"waiting_for": "x"}),  # no usage: not a model call
        ("junk", None),
    ]
    summary = summarize(records, TABLE)
    by_model = {u.model: u for u in summary.by_model}
    assert list(by_model) == ["gpt-4o-mini-2024-07-18", "gpt-4o", None, "local-llm"]  # most tokens first
    mini = by_model["gpt-4o-mini-2024-07-18"]
    assert (mini.calls, mini.prompt, mini.completion, mini.tokens, mini.priced_as) == (
        2,
        3000,
        1000,
        4000,
        "gpt-4o-mini",
    )
    assert mini.cost == pytest.approx(0.00105)
    assert by_model["gpt-4o"].cost == pytest.approx(0.007)
    assert by_model["local-llm"].cost is None and by_model["local-llm"].unpriced == 42
    assert by_model[None].cost is None and (by_model[None].unsplit, by_model[None].tokens) == (50, 50)
    assert [(u.model, u.calls) for u in summary.by_step] == [
        ("draft", 2),
        ("review", 1),
        ("tag", 1),
        ("count", 1),
    ]
    assert summary.cost == pytest.approx(0.00805)
    assert summary.total.tokens == 4000 + 2200 + 42 + 50 and summary.total.unpriced == 92
    assert summary and not summary.complete


def test_summarize__nothing_priced_is_tokens_only_and_nothing_recorded_is_empty():
    summary = summarize([("tag", meta("local-llm", prompt_tokens=4, completion_tokens=2))], TABLE)
    assert summary.cost is None and summary.total.tokens == 6
    assert summarize([("tag", meta("gpt-4o", prompt_tokens=4))], PriceTable()).cost is None
    empty = summarize([("plain", {})], TABLE)
    assert not empty and empty.cost is None and empty.complete


def test_from_setting__none_or_empty_prices_nothing():
    assert PriceTable.from_setting(None).prices == {} and PriceTable.from_setting({}).prices == {}
    assert PriceTable.from_setting({"m": {"input": 0, "output": 1}}).prices == {"m": Price(0.0, 1.0)}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ([("gpt-4o", 1)], "must be a dict of prices by model name, not list"),
        ({"": {"input": 1, "output": 1}}, "model name that is not a non-empty string"),
        ({3: {"input": 1, "output": 1}}, "model name that is not a non-empty string: 3"),
        ({"gpt-4o": 2.5}, "prices 'gpt-4o' as 2.5"),
        ({"gpt-4o": {"input": 2.5}}, "with no output"),
        ({"gpt-4o": {"input": 1, "output": 1, "cached": 1}}, "unknown key(s) cached"),
        ({"gpt-4o": {"input": -1, "output": 1}}, "prices 'gpt-4o' input at -1"),
        ({"gpt-4o": {"input": 1, "output": "10"}}, "output at '10'"),
        ({"gpt-4o": {"input": True, "output": 1}}, "input at True"),
        ({"gpt-4o": {"input": float("inf"), "output": 1}}, "input at inf"),
    ],
)
def test_from_setting__a_malformed_table_is_refused_naming_the_problem(raw, problem):
    with pytest.raises(ValueError) as refused:
        PriceTable.from_setting(raw)
    assert problem in str(refused.value)


@pytest.mark.parametrize(
    ("cost", "shown"),
    [
        (None, "—"),
        (0, "$0.0000"),
        (0.00004, "<$0.0001"),
        (0.0079, "$0.0079"),
        (0.5, "$0.5000"),
        (1234.567, "$1,234.57"),
    ],
)
def test_format_usd(cost, shown):
    assert format_usd(cost) == shown
