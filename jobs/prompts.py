"""What the AI job asks the model, and how it reads the answers. Pure functions, no I/O.

The offline demo model (`jobs.demo`) recognises the extract request by its JSON response format
and finds the transcript after TRANSCRIPT_MARKER, so keep those two stable.
"""

from __future__ import annotations

import json
from typing import Any

from jobs.services.http import InvalidReply

TRANSCRIPT_MARKER = "Transcript:\n"

EXTRACT_SYSTEM = (
    "You read transcripts of sales calls. Reply with one JSON object and nothing else: "
    '{"companies": [...], "actionItems": [...]}. "companies" lists the names of the companies '
    'discussed, each once, as written; "actionItems" lists the commitments made on the call '
    '(for example "I will send the pricing sheet"), each as a short imperative sentence.'
)

SUMMARIZE_SYSTEM = (
    "You write short sales briefs for account executives. From the call title, the transcript, "
    "the action items and the CRM records of the companies involved, write a brief of at most "
    "150 words in plain text: who was on the call and what they want, what we know about each "
    "company, and the next steps."
)


def extract_messages(title: str, transcript: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": EXTRACT_SYSTEM},
        {"role": "user", "content": f"Title: {title}\n\n{TRANSCRIPT_MARKER}{transcript}"},
    ]


def summarize_messages(
    title: str, transcript: str, action_items: list[str], companies: list[dict[str, Any]]
) -> list[dict[str, str]]:
    facts = {"title": title, "actionItems": action_items, "companies": companies}
    return [
        {"role": "system", "content": SUMMARIZE_SYSTEM},
        {
            "role": "user",
            "content": f"{json.dumps(facts, ensure_ascii=False)}\n\n{TRANSCRIPT_MARKER}{transcript}",
        },
    ]


def parse_extraction(content: str) -> dict[str, list[str]]:
    """The model's extract reply as {"companies", "actionItems"}; InvalidReply (retried) otherwise."""
    text = content.strip()
    if text.startswith("```"):  # some models fence JSON even when asked not to
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidReply(f"model returned invalid JSON ({exc}): {content[:200]!r}") from None
    if not isinstance(data, dict):
        raise InvalidReply(f"model returned JSON that is not an object: {content[:200]!r}")
    result: dict[str, list[str]] = {}
    for field in ("companies", "actionItems"):
        items = data.get(field)
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise InvalidReply(f"model returned no list of strings for {field!r}: {content[:200]!r}")
        result[field] = _unique(i.strip() for i in items if i.strip())
    return result


def _unique(items: Any) -> list[str]:
    seen: dict[str, str] = {}
    for item in items:
        seen.setdefault(item.casefold(), item)
    return list(seen.values())
