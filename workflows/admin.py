"""Loaded by the admin's autodiscovery. The run inspector's admins live in the inspector app; the
engine registers its API keys and its schedules here."""

from . import admin_apikeys, admin_schedules  # noqa: F401  (register ApiKeyAdmin and ScheduleAdmin)
