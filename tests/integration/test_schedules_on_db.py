"""Every schedule and start-option case of tests/unit/test_schedules.py again, over the Django store
and a real database (SQLite, or PostgreSQL when DATABASE_URL names it)."""

from tests.unit.test_schedules import *  # noqa: F403
