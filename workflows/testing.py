"""Test your workflows fast: `run_until_idle` / `arun_until_idle`, and `fire_schedules` /
`afire_schedules` for scheduled ones (see workflows.engine.testing)."""

from .engine.testing import SkippingClock, afire_schedules, arun_until_idle, fire_schedules, run_until_idle

__all__ = ["SkippingClock", "afire_schedules", "arun_until_idle", "fire_schedules", "run_until_idle"]
