"""Engine tests over the real store on the test database, with a clock that skips ahead
(tests/harness.py)."""

from tests.harness import django_store, engine_db, h, transaction_connection

__all__ = ["django_store", "engine_db", "h", "transaction_connection"]
