"""Assertions the API tests share."""

from __future__ import annotations

from workflows.models import ApiKey, Attempt, AuditEntry, Entry, Event, Message, Run


def counts() -> dict[str, int]:
    """Rows per table: a refused request leaves every count as it was."""
    return {
        model.__name__: model.objects.count()
        for model in (Run, Entry, Attempt, Message, Event, AuditEntry, ApiKey)
    }


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "detail"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]
