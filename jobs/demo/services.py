"""The demo services' behaviour (DEMO ONLY): one object, plain Python, no sockets.

Every call to a service route is counted under a route name: `extract` and `summarize` (the
model, told apart by the extract request's JSON response format), `crm` and `cms`. A route's
next answers can be scripted (a FIFO per route; `model` scripts either model route):

    ok            the normal answer
    429, 503, …   that status with an error body; `429:3` also sends `Retry-After: 3`
    bad-json      the model answers with content that is not JSON; the CRM/CMS with a broken body
    drop          do the work (the CMS saves the post), then close the connection without answering
    hang:<s>      wait <s> seconds (default 60; cut short by reset), then answer normally
    cut:<n>       a streamed model answer (streaming.py) stops after n pieces, unended; else as drop

Besides scripts, `failure_rate` fails that share of calls with one of `failure_kinds`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import tools
from .streaming import EVENT_STREAM_HEADERS, completion_events, wants_stream

SERVICE_ROUTES = ("extract", "summarize", "agent", "crm", "cms")  # agent: requests with tools (tools.py)
SCRIPT_ROUTES = (*SERVICE_ROUTES, "model")
KIND_RE = re.compile(r"^(ok|bad-json|drop|cut:\d+|hang(:\d+(\.\d+)?)?|[45]\d\d(:\d+(\.\d+)?)?)$")
DEFAULT_HANG = 60.0  # seconds

COMPANY_RE = re.compile(
    r"\b((?:[A-Z][\w&'-]*\s+){0,3}"
    r"(?:Inc|Corp|Corporation|Ltd|LLC|GmbH|AG|Group|Labs|Systems|Technologies|Industries|Holdings)\b)"
)
ACTION_RE = re.compile(r"\bI will ([^.!?\n]+)")
TRANSCRIPT_MARKER = "Transcript:\n"  # as jobs.prompts writes it


class Dropped:
    """Answer nothing: the server closes the connection, the client sees it lost."""


DROPPED = Dropped()


@dataclass(frozen=True)
class DemoRequest:
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""
    host: str = "127.0.0.1"


@dataclass(frozen=True)
class DemoResponse:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterator[bytes] | None = None  # a body sent as it is made (chunked), instead of `body`


def json_response(status: int, data: Any, headers: dict[str, str] | None = None) -> DemoResponse:
    return DemoResponse(
        status, json.dumps(data).encode(), {"Content-Type": "application/json", **(headers or {})}
    )


def check_kind(kind: str) -> str:
    kind = str(kind).strip()
    if not KIND_RE.match(kind):
        raise ValueError(f"unknown demo answer {kind!r} (ok, 429[:s], 5xx, bad-json, drop, hang[:s], cut:n)")
    return kind


def parse_fail_spec(spec: str) -> dict[str, list[str]]:
    """`extract=429,503;crm=500` -> {"extract": ["429", "503"], "crm": ["500"]}."""
    scripts: dict[str, list[str]] = {}
    for part in filter(None, (p.strip() for p in re.split(r"[;\s]+", spec or ""))):
        route, _, kinds = part.partition("=")
        if route not in SCRIPT_ROUTES or not kinds:
            raise ValueError(
                f"bad failure script {part!r}: use ROUTE=KIND,KIND with ROUTE in {SCRIPT_ROUTES}"
            )
        scripts.setdefault(route, []).extend(check_kind(k) for k in kinds.split(","))
    return scripts


@dataclass(frozen=True)
class DemoConfig:
    latency_ms: float = 0.0
    token_ms: float = 0.0  # between the pieces of a streamed model answer
    failure_rate: float = 0.0
    failure_kinds: tuple[str, ...] = ("503",)
    scripts: dict[str, list[str]] = field(default_factory=dict)
    seed: int | None = None

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> DemoConfig:
        env = os.environ if environ is None else environ
        kinds = [check_kind(k) for k in env.get("DEMO_FAILURE_KINDS", "503").split(",") if k.strip()]
        seed = env.get("DEMO_SEED")
        return cls(
            latency_ms=float(env.get("DEMO_LATENCY_MS", "0") or 0),
            token_ms=float(env.get("DEMO_TOKEN_MS", "0") or 0),
            failure_rate=float(env.get("DEMO_FAILURE_RATE", "0") or 0),
            failure_kinds=tuple(kinds) or ("503",),
            scripts=parse_fail_spec(env.get("DEMO_FAIL", "")),
            seed=int(seed) if seed else None,
        )


class DemoServices:
    """The demo model, CRM and CMS with their knobs. Thread-safe: the server runs a thread per call."""

    def __init__(self, config: DemoConfig | None = None) -> None:
        self.config = config or DemoConfig()
        self._lock = threading.Lock()
        self._random = random.Random(self.config.seed)
        self._release = threading.Event()  # set by reset: cuts scripted hangs short
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._release.set()
            self._release = threading.Event()
            self.scripts: dict[str, deque[str]] = {
                route: deque(kinds) for route, kinds in self.config.scripts.items()
            }
            self.calls: Counter[str] = Counter()
            self.log: list[dict[str, Any]] = []
            self.posts: dict[int, dict[str, Any]] = {}
            self.posts_by_key: dict[str, int] = {}

    def script(self, route: str, kinds: list[str]) -> None:
        if route not in SCRIPT_ROUTES:
            raise ValueError(f"unknown route {route!r}; use one of {SCRIPT_ROUTES}")
        checked = [check_kind(k) for k in kinds]
        with self._lock:
            self.scripts.setdefault(route, deque()).extend(checked)

    # --- dispatch --------------------------------------------------------------------------------

    def handle(self, request: DemoRequest) -> DemoResponse | Dropped:
        path = "/" + request.path.strip("/")
        try:
            if path.startswith("/_demo/"):
                return self._admin(request, path)
            if request.method == "POST" and path == "/v1/chat/completions":
                body = self._json(request)
                route = tools.route_of(body) or ("extract" if _is_extract(body) else "summarize")
                return self._serve(route, request, lambda kind: self._model(route, body, kind))
            if request.method == "GET" and path == "/crm/companies":
                return self._serve("crm", request, lambda kind: self._crm(request, kind))
            if request.method == "POST" and path == "/cms/posts":
                return self._serve("cms", request, lambda kind: self._cms_create(request, kind))
            if request.method == "GET" and path == "/cms/posts":
                with self._lock:
                    return json_response(200, {"posts": list(self.posts.values())})
            match = re.fullmatch(r"/cms/posts/(\d+)", path)
            if request.method == "GET" and match:
                with self._lock:
                    post = self.posts.get(int(match.group(1)))
                return json_response(200, post) if post else _error(404, "no such post")
            if request.method == "GET" and path == "/":
                return DemoResponse(200, b"OFFLINE DEMO SERVICES (model, CRM, CMS) - not for production\n")
            return _error(404, f"no demo route {request.method} {path}")
        except _BadRequest as exc:
            return _error(400, str(exc))

    def _serve(self, route: str, request: DemoRequest, answer) -> DemoResponse | Dropped:
        with self._lock:
            self.calls[route] += 1
            kind = self._next_kind(route)
            self.log.append({"route": route, "answer": kind, "at": time.time()})
            release = self._release
        if self.config.latency_ms:
            time.sleep(self.config.latency_ms / 1000)
        if kind.startswith("hang"):
            release.wait(float(kind.partition(":")[2] or DEFAULT_HANG))
            kind = "ok"
        if kind[0].isdigit():
            status, _, retry_after = kind.partition(":")
            headers = {"Retry-After": retry_after} if retry_after else {}
            return _error(int(status), f"demo {route}: scripted {status}", headers)
        response = answer(kind)
        return DROPPED if kind == "drop" or (kind.startswith("cut") and response.stream is None) else response

    def _next_kind(self, route: str) -> str:
        for name in (route, "model") if route in ("extract", "summarize") else (route,):
            queue = self.scripts.get(name)
            if queue:
                return queue.popleft()
        if self.config.failure_rate and self._random.random() < self.config.failure_rate:
            return self._random.choice(self.config.failure_kinds)
        return "ok"

    # --- the model -------------------------------------------------------------------------------

    def _model(self, route: str, body: dict[str, Any], kind: str) -> DemoResponse:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("messages must be a non-empty list")
        prompt = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        if kind == "bad-json":
            content = "Sure! Here are the companies: {companies: [oops"
        elif route == "agent":
            return self._answer(tools.answer(body), body, kind)
        elif route == "extract":
            content = json.dumps(extract(prompt))
        else:
            content = summarize(prompt)
        prompt_tokens, completion_tokens = _tokens(prompt), _tokens(content)
        completion = {
            "id": f"demo-{hashlib.sha1(prompt.encode()).hexdigest()[:12]}",
            "object": "chat.completion",
            "model": body.get("model", "demo"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }  # fmt: skip
        return self._answer(completion, body, kind)

    def _answer(self, completion: dict[str, Any], body: dict[str, Any], kind: str) -> DemoResponse:
        if not wants_stream(body):
            return json_response(200, completion)
        events = completion_events(completion, body, kind, self.config.token_ms, self._release.wait)
        return DemoResponse(200, b"", dict(EVENT_STREAM_HEADERS), stream=events)

    # --- the CRM ---------------------------------------------------------------------------------

    def _crm(self, request: DemoRequest, kind: str) -> DemoResponse:
        if kind == "bad-json":
            return DemoResponse(200, b'{"name": ', {"Content-Type": "application/json"})
        name = request.query.get("name", "").strip()
        if not name:
            raise _BadRequest("give ?name=")
        # The CRM's contract: one company object; 404 when there is no such company.
        return json_response(200, crm_record(name))

    # --- the CMS ---------------------------------------------------------------------------------

    def _cms_create(self, request: DemoRequest, kind: str) -> DemoResponse:
        data = self._json(request)
        title, text = data.get("title"), data.get("body")
        if not isinstance(title, str) or not isinstance(text, str) or not title.strip():
            raise _BadRequest("a post needs a title and a body (strings)")
        key = request.headers.get("idempotency-key", "")
        with self._lock:
            existing = self.posts_by_key.get(key) if key else None
            post_id = existing or len(self.posts) + 1
            if existing is None:
                self.posts[post_id] = {
                    "id": post_id,
                    "url": f"http://{request.host}/cms/posts/{post_id}",
                    "title": title,
                    "body": text,
                    "idempotencyKey": key or None,
                }
                if key:
                    self.posts_by_key[key] = post_id
            post = self.posts[post_id]
        if kind == "bad-json":
            return DemoResponse(201, b'{"id": ', {"Content-Type": "application/json"})
        return json_response(200 if existing else 201, post)

    # --- the knobs -------------------------------------------------------------------------------

    def _admin(self, request: DemoRequest, path: str) -> DemoResponse:
        if request.method == "POST" and path == "/_demo/script":
            data = self._json(request)
            try:
                self.script(str(data.get("route")), list(data.get("responses") or []))
            except ValueError as exc:
                raise _BadRequest(str(exc)) from None
            return json_response(200, {"scripts": self._scripts()})
        if request.method == "POST" and path == "/_demo/reset":
            self.reset()
            return json_response(200, {"reset": True})
        if request.method == "GET" and path == "/_demo/calls":
            with self._lock:
                return json_response(
                    200, {"counts": dict(self.calls), "log": list(self.log), "scripts": self._scripts()}
                )
        return _error(404, f"no demo route {request.method} {path}")

    def _scripts(self) -> dict[str, list[str]]:
        return {route: list(kinds) for route, kinds in self.scripts.items() if kinds}

    @staticmethod
    def _json(request: DemoRequest) -> dict[str, Any]:
        try:
            data = json.loads(request.body or b"{}")
        except ValueError:
            raise _BadRequest("the body is not JSON") from None
        if not isinstance(data, dict):
            raise _BadRequest("the body is not a JSON object")
        return data


class _BadRequest(Exception):
    pass


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> DemoResponse:
    return json_response(status, {"error": {"message": message, "type": "demo_error"}}, headers)


def _is_extract(body: dict[str, Any]) -> bool:
    response_format = body.get("response_format")
    return isinstance(response_format, dict) and response_format.get("type") == "json_object"


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))  # the usual rough count: four characters a token


def _transcript(prompt: str) -> str:
    return prompt.partition(TRANSCRIPT_MARKER)[2] or prompt


# --- deterministic answers ---------------------------------------------------------------------------


def extract(prompt: str) -> dict[str, list[str]]:
    """Companies: capitalised names ending in a company word (Acme Corp, Globex Inc). Action
    items: every "I will …" clause."""
    transcript = _transcript(prompt)
    companies: dict[str, str] = {}
    for match in COMPANY_RE.finditer(transcript):
        name = " ".join(match.group(1).split())
        companies.setdefault(name.casefold(), name)
    actions: dict[str, str] = {}
    for match in ACTION_RE.finditer(transcript):
        clause = " ".join(match.group(1).split()).rstrip(",;: ")
        if clause:
            item = clause[0].upper() + clause[1:]
            actions.setdefault(item.casefold(), item)
    return {"companies": list(companies.values()), "actionItems": list(actions.values())}


PLANS = ("free", "starter", "business", "enterprise")


def crm_record(name: str) -> dict[str, Any]:
    """The CRM's company object, as the CRM's contract has it: `{"name", "plan", "seats"}`."""
    digest = int(hashlib.sha256(name.casefold().encode()).hexdigest(), 16)
    return {"name": name, "plan": PLANS[digest % len(PLANS)], "seats": 1 + (digest >> 8) % 500}


def summarize(prompt: str) -> str:
    """A short brief from the facts (JSON) that precede the transcript in the prompt."""
    head = prompt.partition(TRANSCRIPT_MARKER)[0]
    facts: dict[str, Any] = {}
    for line in head.splitlines():
        if line.strip().startswith("{"):
            try:
                facts = json.loads(line)
            except ValueError:
                facts = {}
            break
    title = facts.get("title") or "Sales call"
    companies = [c for c in facts.get("companies") or [] if isinstance(c, dict)]
    lines = [f"Brief: {title}."]
    if companies:
        described = []
        for company in companies:
            record = company.get("crm") or {}
            if record:
                described.append(
                    f"{company.get('name')} ({record.get('plan')} plan, {record.get('seats')} seats)"
                )
            else:
                described.append(f"{company.get('name')} (not in the CRM)")
        lines.append("Companies: " + "; ".join(described) + ".")
    else:
        lines.append("No companies were named on the call.")
    actions = [a for a in facts.get("actionItems") or [] if isinstance(a, str)]
    if actions:
        lines.append("Next steps: " + " ".join(f"{i}. {a}." for i, a in enumerate(actions, 1)))
    else:
        lines.append("No commitments were made; follow up to agree next steps.")
    return "\n".join(lines)
