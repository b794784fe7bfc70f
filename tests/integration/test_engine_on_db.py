"""Every engine case of tests/unit/test_engine.py again, over the Django store and a real database."""

from tests.unit.test_engine import *  # noqa: F403
from tests.unit.test_flow import *  # noqa: F403
