"""`workflow(..., live_labels=...)`: label values read from more than the state, asked once per
page of runs (each workflow's hook with its runs), shown over the state's; a hook that raises
leaves the state's labels, never a broken page."""

from __future__ import annotations

import pytest

from workflows import conf, setup, workflow
from workflows.models import Run
from workflows.reads import declarations

pytestmark = pytest.mark.django_db


async def _noop(ctx):
    return None


CALLS: list[list[str]] = []


def _live(runs):
    CALLS.append([str(r.id) for r in runs])
    return {str(r.id): {"stage": f"live {r.key[0]}"} for r in runs}


def _broken(runs):
    raise RuntimeError("the app's hook has a bug")


REG = setup(
    use={
        "live": workflow(_noop, state=lambda: {"title": "t", "stage": "stored"}, labels=("title", "stage"),
                         live_labels=_live, version="v1"),
        "broken": workflow(_noop, state=lambda: {"title": "b", "stage": "stored"}, labels=("title", "stage"),
                           live_labels=_broken, version="v1"),
    }
)  # fmt: skip


@pytest.fixture
def registry(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.inspector.test_live_labels.REG"]}
    conf.registry.cache_clear()
    CALLS.clear()
    yield REG
    conf.registry.cache_clear()


def stage(labels) -> str:
    return {d.key: d.text for d in labels.details}["stage"]


def test_live_labels__one_call_per_workflow_for_a_page_and_shown_over_the_state(registry):
    for key in ("a", "b", "c"):
        registry.client("live").get_or_create([key])
    registry.client("broken").get_or_create(["x"])
    runs = list(Run.objects.order_by("created_at"))

    labels = declarations.runs_labels(runs)

    assert len(CALLS) == 1 and sorted(CALLS[0]) == sorted(str(r.id) for r in runs if r.workflow == "live")
    shown = {r.key[0]: stage(labels[str(r.id)]) for r in runs}
    assert shown == {"a": "live a", "b": "live b", "c": "live c", "x": "stored"}  # x: the hook raised
    assert labels[str(runs[0].id)].title == "t"


def test_live_labels__attached_to_a_page_then_read_without_calling_again(registry):
    registry.client("live").get_or_create(["a"])
    runs = list(Run.objects.all())
    declarations.label_runs(runs)
    CALLS.clear()
    assert stage(declarations.run_labels(runs[0])) == "live a" and not CALLS
    assert stage(declarations.run_labels(Run.objects.get())) == "live a" and len(CALLS) == 1  # one run


def test_live_labels__must_be_a_plain_function():
    async def hook(runs):
        return {}

    with pytest.raises(TypeError, match="live_labels must be a plain function"):
        workflow(_noop, live_labels=hook)
