"""Every case of tests/unit/test_large_values.py again, over the Django store and a real database."""

from tests.unit.test_large_values import *  # noqa: F403
