"""Loaded by the admin's autodiscovery (`workflows.admin`). The run inspector's admins live in the
inspector app; the engine registers its API keys and its schedules here."""

from . import apikeys, schedules  # noqa: F401  (register ApiKeyAdmin and ScheduleAdmin)
