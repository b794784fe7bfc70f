"""The pure replay core: recorded entries come back, divergence is caught before anything runs."""

import datetime as dt

import pytest

from workflows.core.exceptions import DuplicateEntryName, HistoryDiverged
from workflows.core.records import EntryRecord
from workflows.core.replay import History

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def entry(position, name, kind="step", scope=""):
    return EntryRecord(
        id=position + 1, scope=scope, position=position, name=name, kind=kind, status="completed"
    )


def test_replay__recorded_entries_come_back_in_order():
    history = History("r1", [entry(0, "a"), entry(1, "b")])
    assert history.replaying("")
    assert history.enter("", "a", "step", now=NOW).recorded.name == "a"
    assert history.enter("", "b", "step", now=NOW).recorded.name == "b"
    assert not history.replaying("")
    fresh = history.enter("", "c", "step", now=NOW)
    assert fresh.recorded is None and fresh.position == 2


def test_replay__diverged_name_fails_naming_both():
    history = History("r1", [entry(0, "extract")])
    with pytest.raises(HistoryDiverged) as caught:
        history.enter("", "summarize", "step", now=NOW)
    assert "summarize" in str(caught.value) and "extract" in str(caught.value)
    assert caught.value.position == 0 and caught.value.run_id == "r1"


def test_replay__diverged_kind_fails():
    history = History("r1", [entry(0, "wait", kind="sleep")])
    with pytest.raises(HistoryDiverged, match="sleep 'wait'"):
        history.enter("", "wait", "step", now=NOW)


def test_replay__duplicate_name_in_scope_fails():
    history = History("r1", [])
    history.enter("", "a", "step", now=NOW)
    with pytest.raises(DuplicateEntryName, match="'a'"):
        history.enter("", "a", "step", now=NOW)


def test_replay__same_name_in_other_scope_is_fine():
    history = History("r1", [entry(0, "a", scope="branch/x")])
    history.enter("", "a", "step", now=NOW)
    assert history.enter("branch/x", "a", "step", now=NOW).recorded is not None


def test_replay__leftover_entries_at_end_diverge():
    history = History("r1", [entry(0, "a"), entry(1, "b")])
    history.enter("", "a", "step", now=NOW)
    with pytest.raises(HistoryDiverged, match="end of the workflow"):
        history.check_finished("")


def test_replay__finished_scope_without_leftovers_passes():
    history = History("r1", [entry(0, "a")])
    history.enter("", "a", "step", now=NOW)
    history.check_finished("")


def test_replay__replaying_is_per_scope():
    history = History("r1", [entry(0, "a", scope="/j.x")])
    assert not history.replaying("")
    assert history.replaying("/j.x")


def test_replay__restart_walks_a_scope_again():
    history = History("r1", [entry(0, "a", scope="/j.x")])
    history.enter("/j.x", "a", "step", now=NOW)
    history.restart("/j.x")
    assert history.enter("/j.x", "a", "step", now=NOW).recorded is not None


def test_replay__peek_and_skip_retired_entries():
    history = History("r1", [entry(0, "old"), entry(1, "b")])
    assert history.peek("").name == "old"
    history.skip("")
    assert history.enter("", "b", "step", now=NOW).recorded.name == "b"


def test_replay__forget_drops_a_pruned_scope():
    history = History("r1", [entry(0, "a", scope="/l#0"), entry(0, "x", scope="/l#0/t")])
    history.forget("/l#0")
    assert not history.replaying("/l#0") and not history.replaying("/l#0/t")
