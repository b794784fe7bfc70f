"""Run ids: UUIDs whose first 48 bits are the creation time in milliseconds (UUID version 7,
RFC 9562 section 5.7), the other 74 bits random.

Why not uuid4: a run's id leads the primary key of the run table and the entry indexes that
every step writes (run, scope, position / name; run alone). Random ids put each new run at a
random page of each of those indexes. In a large history that page is often not in memory, and
after every checkpoint the first change to a page writes the whole page to the WAL: beside a
history of 2,000,000 entries, a step wrote 3.2-3.4 times the WAL with random run ids as with
time-ordered ones (`bench/run_ids.py`). Time-ordered ids put new runs next to each other, at the
end of those indexes.

Still 74 random bits (a run id cannot be guessed); the creation time it shows is the run's
`created_at`, already shown wherever the run is. Written here because Python gets `uuid.uuid7`
only in 3.14, and the format is twelve lines of bit layout, not worth a dependency.
"""

from __future__ import annotations

import os
import time
import uuid

_VERSION_7 = 0x7 << 76  # bits 76..79 (counted from the least significant bit)
_VARIANT_RFC = 0x2 << 62  # bits 62..63: the RFC 4122 / 9562 variant
_CLEAR = ~((0xF << 76) | (0x3 << 62))


def new_run_id() -> uuid.UUID:
    """A new run id: unix time in milliseconds, then version, random bits and variant."""
    millis = time.time_ns() // 1_000_000
    value = (millis & 0xFFFF_FFFF_FFFF) << 80 | int.from_bytes(os.urandom(10), "big")
    return uuid.UUID(int=(value & _CLEAR) | _VERSION_7 | _VARIANT_RFC)


def short_run_id(run_id: uuid.UUID | str) -> str:
    """How pages and lists name a run in brief: the last 8 hex digits of its id. Its first
    digits are the creation time, the same for every run of the same minute; its last ones are
    random (in uuid4 ids too). The admin's search finds a run by them."""
    return (run_id if isinstance(run_id, uuid.UUID) else uuid.UUID(str(run_id))).hex[-8:]


def created_millis(run_id: uuid.UUID | str) -> int:
    """The unix time in milliseconds a version-7 run id carries (tests, tools)."""
    value = run_id if isinstance(run_id, uuid.UUID) else uuid.UUID(run_id)
    return value.int >> 80
