"""Every case of tests/unit/test_unstorable.py again, over the Django store and a real database
(run it on PostgreSQL: it is the database that cannot store NUL or a lone surrogate)."""

from tests.unit.test_unstorable import *  # noqa: F403
