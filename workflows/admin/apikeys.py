"""API keys in the Django admin: add one by name and the key is shown once, in a message; after
that only its prefix is known. A key is revoked by ticking `revoked` (or deleted)."""

from __future__ import annotations

from django.contrib import admin, messages

from ..http.auth import fill_new_key
from ..models import ApiKey


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix_display", "created_at", "last_used_at", "revoked"]
    list_filter = ["revoked"]
    search_fields = ["name", "prefix"]
    readonly_fields = ["prefix_display", "created_at", "last_used_at"]

    @admin.display(description="prefix")
    def prefix_display(self, obj: ApiKey) -> str:
        return f"{obj.prefix}…" if obj.prefix else "-"

    def get_fields(self, request, obj=None):
        if obj is None:  # the add form: the key is made on save
            return ["name"]
        return ["name", "prefix_display", "created_at", "last_used_at", "revoked"]

    def save_model(self, request, obj: ApiKey, form, change: bool) -> None:
        key = None if change else fill_new_key(obj)
        super().save_model(request, obj, form, change)
        if key is not None:
            messages.warning(
                request,
                f"The API key for “{obj.name}” is {key} — copy it now: it is stored only as a hash "
                "and will not be shown again.",
            )
