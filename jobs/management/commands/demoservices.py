"""`python manage.py demoservices`: the OFFLINE DEMO model, CRM and CMS on one port."""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys

from django.core.management.base import BaseCommand, CommandError

from jobs.demo.server import DemoServer
from jobs.demo.services import DemoConfig, DemoServices, check_kind, parse_fail_spec


class Command(BaseCommand):
    help = (
        "Serve the offline DEMO services (an OpenAI-compatible model at /v1, a CRM at /crm, a CMS at "
        "/cms) with knobs for latency and failures. For demos and tests only."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8001, help="0 picks a free port (printed).")
        parser.add_argument("--latency-ms", type=float, help="Delay every answer (env DEMO_LATENCY_MS).")
        parser.add_argument(
            "--token-ms",
            type=float,
            help="Pause between the pieces of a streamed model answer (env DEMO_TOKEN_MS).",
        )
        parser.add_argument(
            "--failure-rate", type=float, help="Share of calls that fail, 0..1 (env DEMO_FAILURE_RATE)."
        )
        parser.add_argument(
            "--failure-kinds",
            help="What a random failure is, e.g. 429,503,bad-json (env DEMO_FAILURE_KINDS).",
        )
        parser.add_argument(
            "--fail",
            action="append",
            default=[],
            metavar="ROUTE=KIND,…",
            help="Script a route's next answers, e.g. extract=429,503 or cms=drop (env DEMO_FAIL). "
            "Routes: extract, summarize, model, crm, cms. Kinds: ok, 429[:secs], 5xx, bad-json, drop, hang[:secs], cut:N.",
        )
        parser.add_argument("--seed", type=int, help="Seed of the random failures (env DEMO_SEED).")
        parser.add_argument("--verbose", action="store_true", help="Log every request.")

    def handle(
        self,
        *args,
        host,
        port,
        latency_ms,
        token_ms,
        failure_rate,
        failure_kinds,
        fail,
        seed,
        verbose,
        **options,
    ):
        try:
            config = DemoConfig.from_env()
            scripts = dict(config.scripts)
            for spec in fail:
                for route, kinds in parse_fail_spec(spec).items():
                    scripts[route] = [*scripts.get(route, []), *kinds]
            changes = {"scripts": scripts}
            if latency_ms is not None:
                changes["latency_ms"] = latency_ms
            if token_ms is not None:
                changes["token_ms"] = token_ms
            if failure_rate is not None:
                changes["failure_rate"] = failure_rate
            if failure_kinds:
                changes["failure_kinds"] = tuple(check_kind(k) for k in failure_kinds.split(","))
            if seed is not None:
                changes["seed"] = seed
            config = dataclasses.replace(config, **changes)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if verbose:
            logging.getLogger("jobs.demo").setLevel(logging.INFO)
        server = DemoServer((host, port), DemoServices(config), verbose=verbose)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        self.stdout.write(
            f"demo services listening on {server.url} (OFFLINE DEMO: model /v1, CRM /crm, CMS /cms)"
        )
        self.stdout.flush()
        try:
            server.serve_forever(poll_interval=0.2)
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
