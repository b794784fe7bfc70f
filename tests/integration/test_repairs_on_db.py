"""Every repair case of tests/unit/test_repairs.py again, over the Django store and a real database."""

from tests.unit.test_repairs import *  # noqa: F403
