"""Template helpers: readable, collapsible JSON; durations; status badges."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from workflows.core.costs import format_usd
from workflows.core.durations import format_duration
from workflows.core.ids import short_run_id

register = template.Library()

OPEN_DEPTH = 2  # levels shown expanded
OPEN_MAX_ITEMS = 12  # a larger object or array starts collapsed below the top level
LONG_TEXT = 160  # characters: longer strings get their own collapsible block


def _scalar(value: Any) -> str:
    if value is None:
        return '<span class="jt-null">null</span>'
    if isinstance(value, bool):
        return f'<span class="jt-bool">{"true" if value else "false"}</span>'
    if isinstance(value, int | float):
        return f'<span class="jt-num">{escape(json.dumps(value))}</span>'
    text = str(value)
    if len(text) > LONG_TEXT or "\n" in text:
        return (
            f'<details class="jt-long"><summary><span class="jt-str">"{escape(text[:80])}…"</span>'
            f' <span class="jt-meta">{len(text)} chars</span></summary>'
            f'<pre class="jt-text">{escape(text)}</pre></details>'
        )
    return f'<span class="jt-str">"{escape(text)}"</span>'


def _node(value: Any, key: str, path: str, depth: int) -> str:
    label = f'<span class="jt-key">{escape(key)}</span>: ' if key else ""
    if isinstance(value, dict | list) and value:
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        opener, closer = ("{", "}") if isinstance(value, dict) else ("[", "]")
        count = f"{len(items)} {'key' if isinstance(value, dict) else 'item'}{'s' if len(items) != 1 else ''}"
        is_open = depth < OPEN_DEPTH and (depth == 0 or len(items) <= OPEN_MAX_ITEMS)
        children = "".join(
            _node(v, str(k) if isinstance(value, dict) else "", f"{path}.{k}", depth + 1) for k, v in items
        )
        return (
            f'<details class="jt-node" data-keep="{escape(path)}"{" open" if is_open else ""}>'
            f'<summary>{label}<span class="jt-brace">{opener}</span>'
            f'<span class="jt-meta"> {count} </span><span class="jt-brace jt-closed">{closer}</span></summary>'
            f'<div class="jt-children">{children}</div><span class="jt-brace">{closer}</span></details>'
        )
    if isinstance(value, dict):
        return f'<div class="jt-leaf">{label}<span class="jt-brace">{{}}</span></div>'
    if isinstance(value, list):
        return f'<div class="jt-leaf">{label}<span class="jt-brace">[]</span></div>'
    return f'<div class="jt-leaf">{label}{_scalar(value)}</div>'


@register.filter
def short_id(run_id: Any) -> str:
    """A run's id in brief (`workflows.core.ids.short_run_id`: its last 8 hex digits)."""
    return short_run_id(run_id)


@register.filter
def json_tree(value: Any, path: str = "json") -> SafeString:
    """A JSON value as a tree of <details> (objects and arrays fold). `path` keys the nodes so a
    live refresh keeps what the reader opened."""
    return mark_safe(f'<div class="jt">{_node(value, "", str(path), 0)}</div>')


@register.filter
def json_inline(value: Any, limit: int = 120) -> str:
    """One line of JSON, cut at `limit` characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= int(limit) else text[: int(limit) - 1] + "…"


@register.filter
def duration(seconds: Any) -> str:
    return format_duration(seconds)


@register.filter
def since(when: dt.datetime | None) -> str:
    """Seconds from `when` to now, formatted."""
    if when is None:
        return "—"
    return format_duration((timezone.now() - when).total_seconds())


@register.simple_tag
def badge(status: str) -> SafeString:
    return format_html('<span class="wf-badge wf-{}">{}</span>', status, status)


@register.filter
def percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f} %"


@register.filter
def usd(cost: float | None) -> str:
    """A model cost in USD (`workflows.core.costs.format_usd`; None: —)."""
    return format_usd(cost)


@register.simple_tag
def jtree(value: Any, *path: Any) -> SafeString:
    """`{% jtree step.input "in" entry.id %}`: json_tree with a path made of several parts."""
    return json_tree(value, "-".join(str(p) for p in path) or "json")


@register.filter
def is_text(value: Any) -> bool:
    """Whether a recorded value is a string (shown as text rather than as a JSON tree)."""
    return isinstance(value, str)
