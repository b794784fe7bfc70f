"""Connectors that only the benchmarks name: the event-loop connector with one of its paths
taken away, to measure that path against the threads. `register()` adds them to the names
WORKFLOWS["CONNECTOR"] takes, in a bench's runner process only (`_runner_with.py`,
`_marking_runner.py`); the product's names are in `workflows.storage.django.paths.CONNECTORS`."""

from __future__ import annotations


def register() -> None:
    from workflows.storage.django import paths
    from workflows.storage.django.connectors import SyncCommit
    from workflows.storage.django.loop_connectors import PostgresLoop

    class PostgresLoopAlone(PostgresLoop):
        """Step commits from the event loop, each in a statement of its own (no group commit)."""

        name = "postgres-loop-alone"

        def __init__(self, threads: int, commit: SyncCommit) -> None:
            super().__init__(threads, commit, group=False)

    class PostgresLoopThreadReads(PostgresLoop):
        """Step commits from the event loop; claims and resume reads through the database threads."""

        name = "postgres-loop-thread-reads"

        def __init__(self, threads: int, commit: SyncCommit) -> None:
            super().__init__(threads, commit, reads=False)

    for connector in (PostgresLoopAlone, PostgresLoopThreadReads):
        paths.CONNECTORS.setdefault(connector.name, connector)
