"""The admin's list pages (runs, audit entries) read WORKFLOWS["READ_DATABASE"] (workflows.
reads.source): a list is what an operator browses, a few seconds behind is fine when the page says
so. Every other admin view of these models (a run's page, the confirmation pages) reads the primary:
an operator acts on what they show.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import SimpleTemplateResponse

from workflows.reads import source as read_source

_ATTR = "_workflows_read_source"


def list_alias(request: HttpRequest) -> str | None:
    """The alias this request's list reads use: set only while a changelist is drawn."""
    found = getattr(request, _ATTR, None)
    return found.alias if found is not None else None


class ReadsListsFromReplica:
    """For a ModelAdmin: its changelist (queryset, filters' choices, counts) reads the read
    database, renders inside the view so a replica that fails mid-page is caught, and is then drawn
    again from the primary with a note rather than answering 500."""

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).using(list_alias(request))  # type: ignore[misc]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        found = read_source.source()
        try:
            return self._drawn(request, found, extra_context)
        except DatabaseError as exc:
            if not found.replica:
                raise
            return self._drawn(request, read_source.failed(found, exc), extra_context)
        finally:
            setattr(request, _ATTR, None)

    def _drawn(
        self, request: HttpRequest, found: read_source.ReadSource, extra_context: dict[str, Any] | None
    ) -> HttpResponse:
        setattr(request, _ATTR, found)
        context = {**(extra_context or {}), "read_source": found}
        response = super().changelist_view(request, context)  # type: ignore[misc]
        if isinstance(response, SimpleTemplateResponse):
            response.render()  # the list's rows are read while rendering: here, not after the view
        return response
