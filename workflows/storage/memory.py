"""An in-memory store with the Django store's semantics, for fast unit tests of the engine.

Not for production: it keeps nothing across processes. It implements the same contract (leases,
fencing, message consumption, wake-ups) so the engine's tests prove the engine, not the SQL.
"""

from __future__ import annotations

from .memory_data import MemoryData
from .memory_presence import MemoryPresence
from .memory_repairs import MemoryRepairs
from .memory_runner import MemoryRunnerSide
from .memory_schedules import MemorySchedules


class MemoryStore(MemoryRunnerSide, MemorySchedules, MemoryRepairs, MemoryPresence, MemoryData):
    """Every part of the in-memory store, over one set of data and one lock."""
