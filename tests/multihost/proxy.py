"""A TCP proxy that delays every chunk by a fixed time in each direction: latency without netem
(this kernel has none). It runs an asyncio loop in a thread of the test process; a runner in a
namespace connects to it on its link's host-side address and it forwards to PostgreSQL on
127.0.0.1. The delay does not cap throughput: chunks queue with their due time and leave in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time


class DelayProxy:
    """`DelayProxy(listen_host, target_port, delay=0.02).start()`; `.port`; `.stop()`."""

    def __init__(self, listen_host: str, target_port: int, *, delay: float, target_host: str = "127.0.0.1"):
        self.listen_host = listen_host
        self.target = (target_host, target_port)
        self.delay = delay
        self.port = 0
        self.connections = 0  # accepted so far: proof the runner really went through it
        self.bytes = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="delay-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> DelayProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _serve(self) -> asyncio.base_events.Server:
        return await asyncio.start_server(self._accept, self.listen_host, 0)

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        self._writers |= {client_w, server_w}
        await asyncio.gather(self._pipe(client_r, server_w), self._pipe(server_r, client_w))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read chunks as they come; a second task sends each one `delay` after it arrived."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    break
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(chunk)
                await writer.drain()

        sender = asyncio.create_task(send())
        try:
            while chunk := await reader.read(65536):
                self.bytes += len(chunk)
                queue.put_nowait((time.monotonic() + self.delay, chunk))
        except OSError:
            pass
        finally:
            queue.put_nowait((0.0, b""))
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await sender
            with contextlib.suppress(OSError):
                writer.close()

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for writer in self._writers:
                writer.close()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
