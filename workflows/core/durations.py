"""How a duration reads to a person: "250 ms", "4 s", "4.2 s", "1 min 5 s", "2 h 5 min", "1 d 3 h".

One helper for every page, event and command that shows a span of time, so an operator never
has to convert "4000ms" in their head and the same wait reads the same everywhere. Pure Python.
"""

from __future__ import annotations

import math

_UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def format_duration(seconds: float | None) -> str:
    """`seconds` in the largest two units that matter; "—" for None (unknown), and a negative or
    non-finite value (a clock skew, a bug upstream) as 0 rather than nonsense."""
    if seconds is None:
        return "—"
    value = float(seconds)
    if not math.isfinite(value) or value < 0:
        value = 0.0
    if value < 1:
        ms = round(value * 1000)
        if ms < 1000:
            return f"{ms} ms"
        value = 1.0
    if value < 10:
        tenths = round(value, 1)
        if tenths < 10:
            return f"{tenths:g} s"
    total = round(value)
    for i, (size, unit) in enumerate(_UNITS[:-1]):
        if total >= size:
            smaller, small_unit = _UNITS[i + 1]
            total = round(value / smaller) * smaller  # 6 d 23 h 59 min reads "7 d"
            if total >= (_UNITS[i - 1][0] if i else math.inf):
                return format_duration(total)  # 23 h 59 min 40 s rounds up to "1 d"
            head, rest = divmod(total, size)
            return f"{head} {unit}" + (f" {rest // smaller} {small_unit}" if rest else "")
    return f"{total} s"
