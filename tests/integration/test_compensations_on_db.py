"""Every case of tests/unit/test_compensations.py again, over the Django store and a real database."""

from tests.unit.test_compensations import *  # noqa: F403
