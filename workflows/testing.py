"""Test your workflows fast: `run_until_idle` / `arun_until_idle` (see workflows.engine.testing)."""

from .engine.testing import SkippingClock, arun_until_idle, run_until_idle

__all__ = ["SkippingClock", "arun_until_idle", "run_until_idle"]
