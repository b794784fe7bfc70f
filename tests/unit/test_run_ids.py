"""Run ids are UUID version 7 (RFC 9562): the creation time in milliseconds first, then random
bits, so new runs sit together at the end of every index their id leads."""

from __future__ import annotations

import time
import uuid

from workflows.core.ids import created_millis, new_run_id, short_run_id


def test_a_run_id_is_a_version_7_uuid_carrying_its_creation_time():
    before = time.time_ns() // 1_000_000
    run_id = new_run_id()
    after = time.time_ns() // 1_000_000
    assert (run_id.version, run_id.variant) == (7, uuid.RFC_4122)
    assert before <= created_millis(run_id) <= after
    assert created_millis(str(run_id)) == created_millis(run_id)


def test_ids_made_in_later_milliseconds_sort_after_earlier_ones_as_uuids_and_as_text():
    ids = []
    for _ in range(5):
        ids.append(new_run_id())
        deadline = time.time_ns() // 1_000_000 + 1
        while time.time_ns() // 1_000_000 <= deadline:  # the next id falls in a later millisecond
            pass
    assert sorted(ids) == ids
    assert sorted(str(i) for i in ids) == [str(i) for i in ids]
    assert sorted(i.hex for i in ids) == [i.hex for i in ids]  # as SQLite stores them


def test_ids_made_in_one_millisecond_differ_in_their_random_bits():
    ids = {new_run_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert len({i.int & ((1 << 62) - 1) for i in ids}) == 10_000


def test_a_run_is_named_in_brief_by_the_random_end_of_its_id():
    run_id = new_run_id()
    assert short_run_id(run_id) == short_run_id(str(run_id)) == str(run_id)[-8:] == run_id.hex[-8:]
    same_minute = [new_run_id() for _ in range(1_000)]
    assert len({str(i)[:8] for i in same_minute}) <= 2  # the time: shared within a minute
    assert len({short_run_id(i) for i in same_minute}) == 1_000
