"""`manage.py runworkflows` with `WORKFLOWS` keys overridden from $BENCH_WORKFLOWS (a JSON object),
so a bench can run the same workload with a setting on and off, or through another connector
(`bench/hot_path.py`; the bench-only connector names of `bench/_connectors.py` are known here).

    BENCH_WORKFLOWS='{"CONNECTOR": "postgres-threads"}' python bench/_runner_with.py --concurrency 20
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django
    from django.conf import settings

    django.setup()
    from bench._connectors import register

    register()
    settings.WORKFLOWS = {**settings.WORKFLOWS, **json.loads(os.environ.get("BENCH_WORKFLOWS") or "{}")}
    from django.core.management import execute_from_command_line

    execute_from_command_line([str(ROOT / "manage.py"), "runworkflows", *sys.argv[1:]])


if __name__ == "__main__":
    main()
