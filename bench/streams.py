"""Streams from steps (issue 32): what 1,000 chunks cost. Prints figures; never a timed test.

    .venv/bin/python bench/streams.py                 # both databases, about a minute
    .venv/bin/python bench/streams.py --db sqlite --chunks 200   # a small smoke run

Per database (a fresh one: PostgreSQL `bench_workflows`, SQLite `var/bench/bench.sqlite3`), one
step of a real Runner over the real DjangoStore (as `runworkflows` builds it) writes `--chunks`
text tokens to its stream, at three paces: as fast as it can (the writer never yields, so the
batch waits for the step's end), one token a millisecond, and one every 5 ms (a fast model,
200 tokens/s). For each: the commits the stream took (and chunks per commit), and the
step's own time writing them against the same loop writing nothing (the cost the writer sees).
Each database is measured in a child process, since Django binds its database when it starts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import ROOT, bench_env, progress, setup_django
from bench._db import create_database, drop_database, reset_tables

PACES = (0.0, 0.001, 0.005)  # seconds between tokens


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--chunks", type=int, default=1000, help="tokens the step writes (default 1000)")
    parser.add_argument("--child", choices=["sqlite", "postgres"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


async def _one(n: int, pace: float, mode: str) -> dict:
    """One run of `bench_stream`: the step's own seconds and the commits that carried chunks."""
    from workflows import conf
    from workflows.engine.runner import Runner
    from workflows.models import StreamChunk
    from workflows.storage.django import DjangoStore

    class CountingStore(DjangoStore):
        chunk_commits = 0

        async def acommit(self, *, run_id, owner, commit, now):
            if commit.stream_chunks:
                self.chunk_commits += 1
            return await super().acommit(run_id=run_id, owner=owner, commit=commit, now=now)

    store = CountingStore(db_threads=4)
    runner = Runner(registry=conf.registry(), store=store, concurrency=4, watch=False)
    client = conf.registry().client("bench_stream")
    client.store = store
    handle = await client.aget_or_create([str(n), str(pace), mode])
    await runner.run_due()
    info = await handle.ainfo()
    store.close()
    if info.status != "completed":
        raise RuntimeError(f"the stream run ended {info.status}: {info.error}")
    stored = await asyncio.to_thread(StreamChunk.objects.filter(run_id=handle.run_id).count)
    return {"seconds": info.result, "commits": store.chunk_commits, "stored": stored}


def child(args: argparse.Namespace) -> None:
    setup_django()
    from asgiref.sync import SyncToAsync
    from django.db import connections

    figures = {}
    for pace in PACES:
        progress(f"{args.child}: {args.chunks} chunks, one every {pace * 1000:g} ms")
        reset_tables()
        base = asyncio.run(_one(args.chunks, pace, "baseline"))
        streamed = asyncio.run(_one(args.chunks, pace, "stream"))
        SyncToAsync.single_thread_executor.submit(connections.close_all).result()
        if streamed["stored"] != args.chunks:
            raise RuntimeError(f"{streamed['stored']} of {args.chunks} chunks stored")
        figures[f"{pace * 1000:g} ms"] = {"baseline": base, "stream": streamed}
    Path(args.out).write_text(json.dumps(figures))


def report(results: dict, n: int) -> str:
    lines = [
        f"{n} chunks from one step      commits  chunks/commit  step ms (streaming)  step ms (baseline)"
        "  ms per 1,000 chunks",
    ]
    for db, figures in results.items():
        for pace, f in figures.items():
            s, b = f["stream"], f["baseline"]
            extra = (s["seconds"] - b["seconds"]) * 1000 * 1000 / n
            lines.append(
                f"{db:<9} one every {pace:<6}    {s['commits']:>7}  {n / max(s['commits'], 1):>13.1f}"
                f"  {s['seconds'] * 1000:>19.1f}  {b['seconds'] * 1000:>18.1f}  {extra:>19.1f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args)
        return 0
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for db in ["sqlite", "postgres"] if args.db == "both" else [args.db]:
            create_database(db)
            out = Path(tmp) / f"{db}.json"
            command = [sys.executable, str(Path(__file__).resolve()), "--child", db, "--out", str(out)]
            try:
                done = subprocess.run([*command, "--chunks", str(args.chunks)], cwd=ROOT, env=bench_env(db))
            finally:
                drop_database(db)
            if done.returncode != 0:
                return done.returncode
            results[db] = json.loads(out.read_text())
    print(report(results, args.chunks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
