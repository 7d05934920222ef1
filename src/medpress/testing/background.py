"""Running an aiohttp server on its own event loop in a background thread, for tests."""

from __future__ import annotations

import asyncio
import threading
from typing import Self

from aiohttp import web


class BackgroundServer:
    """Subclasses build ``self._runner`` in :meth:`_start`; ``port`` 0 picks a free port."""

    host: str = "127.0.0.1"
    port: int = 0

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    async def _start(self) -> None:
        raise NotImplementedError

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _serve_app(self, app: web.Application, **runner_kw: object) -> None:
        """Start ``app`` on host:port and record the port actually bound."""
        self._runner = web.AppRunner(app, access_log=None, **runner_kw)  # type: ignore[arg-type]
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    def start(self) -> Self:
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._start())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{type(self).__name__} did not start")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        loop = self._loop
        asyncio.run_coroutine_threadsafe(self._stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
