"""`manage.py check` refuses a malformed WORKFLOWS["MODEL_PRICES"] with a clear error
(workflows.E024), and the pages then price nothing rather than fail."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from workflows import checks
from workflows.reads.costs import prices

BASE = {"REGISTRIES": ["jobs.workflows.registry"]}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ([["gpt-4o", 2.5, 10]], "must be a dict of prices by model name, not list"),
        ({"gpt-4o": 2.5}, 'prices \'gpt-4o\' as 2.5: give {"input": USD, "output": USD}'),
        ({"gpt-4o": {"in": 2.5, "out": 10}}, "with unknown key(s) in, out"),
        ({"gpt-4o": {"input": 2.5}}, "with no output"),
        ({"gpt-4o": {"input": -2.5, "output": 10}}, "input at -2.5: a price is a number of USD per million"),
        ({"gpt-4o": {"input": 2.5, "output": "10"}}, "output at '10'"),
        ({"": {"input": 1, "output": 1}}, "model name that is not a non-empty string"),
    ],
)
def test_e024__a_malformed_price_table(given, expected):
    with override_settings(WORKFLOWS={**BASE, "MODEL_PRICES": given}):
        [error] = checks.check_settings()
        assert prices().prices == {}  # the pages show tokens only
    assert error.id == "workflows.E024" and expected in error.msg
    assert error.msg.startswith('WORKFLOWS["MODEL_PRICES"] ') and "gpt-4o-mini" in error.hint


def test_e024__manage_py_check_fails_on_it():
    with override_settings(WORKFLOWS={**BASE, "MODEL_PRICES": {"gpt-4o": {"input": "cheap", "output": 1}}}):
        with pytest.raises(SystemCheckError, match=r"workflows\.E024"):
            call_command("check")


@pytest.mark.parametrize(
    "given", [{}, None, {"gpt-4o": {"input": 2.5, "output": 10}, "local": {"input": 0, "output": 0}}]
)
def test_model_prices__valid_tables_pass(given):
    with override_settings(WORKFLOWS={**BASE, "MODEL_PRICES": given}):
        assert checks.check_settings() == []
