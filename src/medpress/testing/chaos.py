"""A chaos proxy: an HTTP reverse proxy on 127.0.0.1 that makes any upstream misbehave.

It sits between the harness and an OpenAI-compatible server (e.g. :class:`FakeServer`) and,
with seeded probabilities drawn once per request in arrival order, injects:

- ``429``: storms, i.e. runs of several consecutive 429s, each with ``Retry-After``;
- ``500`` / ``503``: a server error without forwarding;
- ``reset``: the connection is closed without any response;
- ``slow``: the response is held for ``slow_s`` (set it past the client's timeout);
- ``truncated``: the upstream's 200 body cut in half.

Every other request is forwarded unchanged (after an optional latency jitter). ``injected``
counts each fault as it is served; ``CLIENT_KIND`` names the retry kind the
:class:`~medpress.backends.OpenAIBackend` records for it, so a test can compare the two.

Run standalone: ``python -m medpress.testing chaos --upstream http://127.0.0.1:8011/v1
--p-500 0.05 --p-reset 0.02``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from medpress.testing.background import BackgroundServer

CHAOS_KINDS = ("429", "500", "503", "reset", "slow", "truncated")
CLIENT_KIND = {"429": "http_429", "500": "http_5xx", "503": "http_5xx", "reset": "connection",
               "slow": "timeout", "truncated": "bad_response"}
_FORWARDED_HEADERS = ("Authorization", "Content-Type", "Accept")
# --p-<kind> options of the standalone proxy, and what each injects.
P_HELP = {
    "storm": "a request starting a 429 storm (3-8 consecutive 429s)",
    "500": "an HTTP 500 without forwarding",
    "503": "an HTTP 503 without forwarding",
    "reset": "the connection closed with no response",
    "slow": "the response held for --slow-s",
    "truncated": "the upstream's body cut in half",
}


class ChaosProxy(BackgroundServer):
    """Start with :meth:`start` (runs in a background thread) or use as a context manager.

    Args:
        upstream: the upstream's base URL, e.g. ``http://127.0.0.1:8011/v1``; the proxy's
            :attr:`base_url` has the same path.
        seed: seeds the fault sequence; request ``n`` (in arrival order) always meets the
            same fate for a given seed and set of probabilities.
        p_storm: probability that a request starts a 429 storm of ``storm_len`` requests
            (a random length in the inclusive range), this one included.
        p_500, p_503, p_reset, p_slow, p_truncated: per-request probabilities of each fault.
        retry_after: the ``Retry-After`` header sent with every 429.
        slow_s: how long a ``slow`` response is held before it is forwarded.
        latency_s: extra latency for every forwarded request, uniform in this range.
    """

    def __init__(self, upstream: str, *, seed: int = 0, p_storm: float = 0.0,
                 storm_len: tuple[int, int] = (3, 8), retry_after: str = "1",
                 p_500: float = 0.0, p_503: float = 0.0, p_reset: float = 0.0,
                 p_slow: float = 0.0, slow_s: float = 5.0, p_truncated: float = 0.0,
                 latency_s: tuple[float, float] = (0.0, 0.0),
                 host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__()
        parts = urlsplit(upstream)
        self.upstream_origin = f"{parts.scheme}://{parts.netloc}"
        self.path = parts.path.rstrip("/")
        self.p = {"storm": p_storm, "500": p_500, "503": p_503, "reset": p_reset,
                  "slow": p_slow, "truncated": p_truncated}
        if sum(self.p.values()) > 1.0:
            raise ValueError("fault probabilities add up to more than 1")
        self.storm_len = storm_len
        self.retry_after = retry_after
        self.slow_s = slow_s
        self.latency_s = latency_s
        self.host = host
        self.port = port
        self.injected: Counter[str] = Counter()
        self.storms = 0
        self.requests = 0
        self.forwarded = 0
        self._faults = random.Random(seed)
        self._jitter = random.Random(seed + 1)
        self._storm_left = 0
        self._session: aiohttp.ClientSession | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}{self.path}"

    def expected_retries(self) -> Counter[str]:
        """The injected faults as the client's retry kinds (``http_429``, ``timeout`` …)."""
        out: Counter[str] = Counter()
        for kind, n in self.injected.items():
            out[CLIENT_KIND[kind]] += n
        return out

    def _draw(self) -> str:
        """This request's fate: a fault kind, or ``ok``. Called once per request, in order."""
        if self._storm_left > 0:
            self._storm_left -= 1
            return "429"
        u = self._faults.random()
        for kind, p in self.p.items():
            if u < p:
                if kind == "storm":
                    self.storms += 1
                    self._storm_left = self._faults.randint(*self.storm_len) - 1
                    return "429"
                return kind
            u -= p
        return "ok"

    async def _forward(self, request: web.Request,
                       body: bytes) -> tuple[int, bytes, dict[str, str]]:
        assert self._session is not None
        headers = {h: request.headers[h] for h in _FORWARDED_HEADERS if h in request.headers}
        url = self.upstream_origin + request.rel_url.path_qs
        async with self._session.request(request.method, url, data=body, headers=headers) as r:
            raw = await r.read()
            out = {h: r.headers[h] for h in ("Content-Type", "Retry-After") if h in r.headers}
            self.forwarded += 1
            return r.status, raw, out

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        body = await request.read()
        fate = self._draw()
        if fate == "429":
            self.injected["429"] += 1
            return web.json_response({"error": {"message": "rate limited (chaos)"}}, status=429,
                                     headers={"Retry-After": self.retry_after})
        if fate in ("500", "503"):
            self.injected[fate] += 1
            return web.json_response({"error": {"message": "server error (chaos)"}},
                                     status=int(fate))
        if fate == "reset":
            self.injected["reset"] += 1
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        lo, hi = self.latency_s
        if hi > 0:
            await asyncio.sleep(self._jitter.uniform(lo, hi))
        if fate == "slow":
            self.injected["slow"] += 1
            await asyncio.sleep(self.slow_s)  # cancelled when the client gives up
        status, raw, headers = await self._forward(request, body)
        if fate == "truncated" and status == 200:
            self.injected["truncated"] += 1
            raw = raw[: len(raw) // 2]
        return web.Response(body=raw, status=status, headers=headers)

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        await self._serve_app(app, handler_cancellation=True, shutdown_timeout=1.0)

    async def _stop(self) -> None:
        await super()._stop()
        if self._session is not None:
            await self._session.close()

    def stats(self) -> dict[str, Any]:
        return {"requests": self.requests, "forwarded": self.forwarded, "storms": self.storms,
                "injected": dict(self.injected)}


def parser() -> argparse.ArgumentParser:
    """The standalone proxy's options (every one with its help text)."""
    ap = argparse.ArgumentParser(
        prog="python -m medpress.testing chaos",
        description="A fault-injecting proxy on 127.0.0.1 in front of an OpenAI-compatible "
                    "server. Each request meets at most one fault, drawn with the seeded "
                    "probabilities below; the others are forwarded unchanged. Ctrl-C prints "
                    "what was injected.")
    ap.add_argument("--upstream", required=True, help="upstream base URL, e.g. http://h:p/v1")
    ap.add_argument("--port", type=int, default=8012,
                    help="port to listen on, 0 for a free one (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seeds the fault sequence: request n always meets the same fate")
    for kind, what in P_HELP.items():
        ap.add_argument(f"--p-{kind}", type=float, default=0.0,
                        help=f"probability of {what} (default: %(default)s)")
    ap.add_argument("--slow-s", type=float, default=5.0,
                    help="seconds a slow response is held (default: %(default)s)")
    ap.add_argument("--retry-after", default="1",
                    help="Retry-After header sent with every 429 (default: %(default)s)")
    return ap


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    proxy = ChaosProxy(args.upstream, seed=args.seed, port=args.port, p_storm=args.p_storm,
                       p_500=args.p_500, p_503=args.p_503, p_reset=args.p_reset,
                       p_slow=args.p_slow, slow_s=args.slow_s, p_truncated=args.p_truncated,
                       retry_after=args.retry_after)

    async def forever() -> None:
        await proxy._start()
        print(f"chaos proxy on {proxy.base_url} -> {args.upstream}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await proxy._stop()

    try:
        asyncio.run(forever())
    except KeyboardInterrupt:
        print(proxy.stats())

