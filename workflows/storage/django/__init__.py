"""The real store: the engine's tables over Django's database connection, SQLite and PostgreSQL."""

from .store import DjangoStore

__all__ = ["DjangoStore"]
