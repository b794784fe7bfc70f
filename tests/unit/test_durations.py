"""Durations read the same everywhere: "250 ms", "4 s", "1 min 5 s", never "4000ms"."""

from __future__ import annotations

import pytest

from workflows.core.durations import format_duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "—"),
        (0, "0 ms"),
        (0.012, "12 ms"),
        (0.25, "250 ms"),
        (0.9996, "1 s"),  # rounds up into the next unit, never "1000 ms"
        (4, "4 s"),
        (4.2, "4.2 s"),
        (9.96, "10 s"),
        (42.4, "42 s"),
        (59.6, "1 min"),
        (65, "1 min 5 s"),
        (120, "2 min"),
        (184, "3 min 4 s"),
        (3599.6, "1 h"),
        (7500, "2 h 5 min"),
        (86340, "23 h 59 min"),
        (86399.7, "1 d"),
        (97200, "1 d 3 h"),
        (604799, "7 d"),  # 6 d 23 h 59 min 59 s, to the hour
        (-3, "0 ms"),  # a skewed clock never prints a negative span
        (float("inf"), "0 ms"),
    ],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text
