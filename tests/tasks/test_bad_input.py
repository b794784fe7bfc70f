"""Django tasks through the DurableBackend with text PostgreSQL cannot store: enqueue refuses it
with the framework's ValueError and stores nothing; a result id holding it is simply unknown."""

from __future__ import annotations

import pytest

from workflows.models import Run
from workflows.tasks.framework import TaskResultDoesNotExist, task_backends

from . import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [(("a\ud83d", "b"), {}), ((1,), {"b": {"k\udfff": 1}}), ((1,), {"b": "nul\x00"})],
    ids=["surrogate-arg", "surrogate-dict-key", "nul"],
)
def test_enqueue__unstorable_text_is_a_value_error_and_stores_nothing(args, kwargs):
    with pytest.raises(ValueError, match=r"NUL|surrogate"):
        tasks.add.enqueue(*args, **kwargs)
    assert not Run.objects.exists()


@pytest.mark.parametrize("result_id", ["\ud83d", "a\x00"])
def test_get_result__an_id_holding_unstorable_text_is_unknown(result_id):
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(result_id)
