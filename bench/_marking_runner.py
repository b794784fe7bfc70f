"""`manage.py runworkflows` that notes when each phase of resuming a run begins and ends, for
`bench/send_path.py`: one line `<phase> <unix time>` per event in $BENCH_MARKS_PATH. The phases
are the store calls and engine steps between a NOTIFY and a resumed run's body: the wake, the
claim, the resumed run's read, the execution's start. Wrappers only: the store and the engine run
unchanged.

    BENCH_MARKS_PATH=var/bench/marks.txt python bench/_marking_runner.py --concurrency 20

$BENCH_WORKFLOWS (a JSON object) overrides WORKFLOWS keys, as for `bench/_runner_with.py`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _wrap(owner: Any, name: str, mark: Callable[[str], None]) -> None:
    real = getattr(owner, name)

    async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        mark(f"{name}>")
        try:
            return await real(self, *args, **kwargs)
        finally:
            mark(f"{name}<")

    setattr(owner, name, timed)


def _wrap_sync(owner: Any, name: str, mark: Callable[[str], None]) -> None:
    """The same around a store method as it runs in a database thread: the gap to the async
    twin's marks is the hop to the thread and back."""
    real = getattr(owner, name)

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        mark(f"{name}>")
        try:
            return real(self, *args, **kwargs)
        finally:
            mark(f"{name}<")

    setattr(owner, name, timed)


def main() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings

    # WORKFLOWS keys overridden for this runner, as bench/_runner_with.py does
    from bench._connectors import register

    register()
    settings.WORKFLOWS = {**settings.WORKFLOWS, **json.loads(os.environ.get("BENCH_WORKFLOWS") or "{}")}
    from workflows.engine.execution import Execution
    from workflows.storage.django import DjangoStore

    marks = open(os.environ["BENCH_MARKS_PATH"], "a", buffering=1)

    def mark(phase: str) -> None:
        marks.write(f"{phase} {time.time():.6f}\n")

    for name in ("aclaim", "aload_resume"):
        _wrap(DjangoStore, name, mark)
        _wrap_sync(DjangoStore, name[1:], mark)
    _wrap(Execution, "execute", mark)
    watch = DjangoStore.watch

    async def watching(self: Any, wake: Callable[[], None]) -> None:
        def woken() -> None:
            mark("notify")
            wake()

        await watch(self, woken)

    DjangoStore.watch = watching  # type: ignore[method-assign]
    from django.core.management import execute_from_command_line

    execute_from_command_line([str(ROOT / "manage.py"), "runworkflows", *sys.argv[1:]])


if __name__ == "__main__":
    main()
