"""Serve the demo services on a port (DEMO ONLY): the standard library's threading HTTP server."""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .services import DROPPED, DemoRequest, DemoServices
from .streaming import StreamCut

logger = logging.getLogger("jobs.demo")


class DemoServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], services: DemoServices, *, verbose: bool = False) -> None:
        super().__init__(address, _Handler)
        self.services = services
        self.verbose = verbose

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real services do
    server: DemoServer

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        request = DemoRequest(
            method=self.command,
            path=url.path,
            query=dict(urllib.parse.parse_qsl(url.query)),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=self.rfile.read(length) if length else b"",
            host=self.headers.get("Host") or self.server.url.removeprefix("http://"),
        )
        result = self.server.services.handle(request)
        if result is DROPPED:  # the work is done; the answer never arrives
            self.close_connection = True
            return
        self.send_response(result.status)
        for name, value in result.headers.items():
            self.send_header(name, value)
        if result.stream is not None:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._write_chunked(result.stream)
            return
        self.send_header("Content-Length", str(len(result.body)))
        self.end_headers()
        self.wfile.write(result.body)

    def _write_chunked(self, stream: Iterator[bytes]) -> None:
        """Each piece as an HTTP/1.1 chunk, sent at once (a client reads it as it comes); a
        StreamCut, or a client gone, closes the connection without the last (empty) chunk."""
        try:
            for piece in stream:
                if piece:  # an empty chunk would end the body
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (StreamCut, OSError):
            self.close_connection = True
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def log_message(self, format: str, *args) -> None:
        if self.server.verbose:
            logger.info("%s %s", self.address_string(), format % args)
