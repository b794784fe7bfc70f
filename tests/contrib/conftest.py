"""Engine tests of the contrib integrations over the real store (tests/harness.py)."""

from tests.harness import engine_db, h, transaction_connection

__all__ = ["engine_db", "h", "transaction_connection"]
