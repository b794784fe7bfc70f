"""Loaded by the admin's autodiscovery. The run inspector's admins live in the inspector app; the
engine registers only its API keys here."""

from . import admin_apikeys  # noqa: F401  (registers ApiKeyAdmin)
