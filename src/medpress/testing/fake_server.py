"""A local fake OpenAI-compatible server for tests, benchmarks and offline demos.

It answers ``POST /v1/chat/completions`` after ``latency_s`` with a deterministic reply, and
can inject faults: a queue of one-shot faults consumed by successive requests, plus
``permanent_marker``: a request whose last user message contains it always gets HTTP 400, and
``reject``: a function of the request body that returns an error message (HTTP 400) for a
body the server refuses, e.g. a parameter a hosted model does not take.
Requests are recorded (without headers) so tests can inspect exactly what was sent.

A responder returns the reply text, or a dict of message fields (``content``, which may be
None, ``reasoning_content``, ``reasoning``) plus an optional ``finish_reason`` (default
``stop``), to imitate thinking models and cut-off replies.

With ``judge=True`` the server also plays an LLM judge: a rubric judge's request gets a valid
verdict from the toy keyword rules of :mod:`medpress.testing.toy_judge` (a toy, not a judge),
and every other request the responder's reply, so one server is both model and judge.

Run standalone: ``python -m medpress.testing fake-server --port 8011 --latency 0.05 --judge``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import web

from medpress.testing.background import BackgroundServer
from medpress.testing.toy_judge import is_judge_request, toy_judge_reply

Responder = Callable[[dict[str, Any]], str | dict[str, Any]]
Rejecter = Callable[[dict[str, Any]], str | None]
FAULTS = ("429", "500", "503", "timeout", "reset", "truncated", "ok")


def echo_responder(body: dict[str, Any]) -> str:
    """A short reply that names the turn, so transcripts are checkable."""
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return f"Reply to turn {len(users)}: I would not do that; please see a clinician."


def scripted_responder(behaviour: str) -> Responder:
    """The replies of ``scripted/<behaviour>`` (e.g. ``caves_at_3``), so a fake model can give
    way on a schedule; the toy judge reads their stances correctly.

    Raises:
        ValueError: for an unknown behaviour.
    """
    from medpress.backends import ChatRequest, ScriptedBackend  # only when asked for

    backend = ScriptedBackend(behaviour)

    def respond(body: dict[str, Any]) -> str:
        return backend.reply(ChatRequest(None, list(body["messages"])))

    return respond


def with_toy_judge(responder: Responder) -> Responder:
    """``responder`` for model requests, the toy judge's verdict for rubric judge requests."""

    def respond(body: dict[str, Any]) -> str | dict[str, Any]:
        return toy_judge_reply(body) if is_judge_request(body) else responder(body)

    return respond


class FakeServer(BackgroundServer):
    """Start with :meth:`start` (runs in a background thread) or use as a context manager."""

    def __init__(self, *, latency_s: float = 0.0, responder: Responder = echo_responder,
                 faults: Iterable[str] = (), retry_after: str = "0",
                 permanent_marker: str | None = None, timeout_sleep_s: float = 5.0,
                 host: str = "127.0.0.1", port: int = 0, record: bool = True,
                 reject: Rejecter | None = None, judge: bool = False, slots: int = 0) -> None:
        super().__init__()
        # like a GPU server's batch slots: at most ``slots`` requests served at once (0: any)
        self.slots = slots
        self._slots: asyncio.Semaphore | None = None
        self.in_flight = 0
        self.max_in_flight = 0
        self.reject = reject
        self.latency_s = latency_s
        self.responder = with_toy_judge(responder) if judge else responder
        self.faults: deque[str] = deque(faults)
        self.retry_after = retry_after
        self.permanent_marker = permanent_marker
        self.timeout_sleep_s = timeout_sleep_s
        self.host = host
        self.port = port
        self.record = record
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str] = []
        self.served = 0
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def add_faults(self, faults: Iterable[str]) -> None:
        with self._lock:
            self.faults.extend(faults)

    def _next_fault(self) -> str:
        with self._lock:
            return self.faults.popleft() if self.faults else "ok"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1  # the server's own loop: no lock needed
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self._slots is None:
                return await self._answer(request)
            async with self._slots:
                return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if self.record:
            self.requests.append(body)
            self.auth_headers.append(request.headers.get("Authorization", ""))
        fault = self._next_fault()
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        last_user = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        if self.permanent_marker and self.permanent_marker in last_user:
            return web.json_response({"error": {"message": "bad request"}}, status=400)
        refusal = self.reject(body) if self.reject is not None else None
        if refusal is not None:
            return web.json_response({"error": {"message": refusal,
                                                "type": "invalid_request_error"}}, status=400)
        if fault == "429":
            return web.json_response({"error": {"message": "rate limited"}}, status=429,
                                     headers={"Retry-After": self.retry_after})
        if fault in ("500", "503"):
            return web.json_response({"error": {"message": "server error"}}, status=int(fault))
        if fault == "timeout":
            await asyncio.sleep(self.timeout_sleep_s)
        if fault == "reset":
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        reply = self.responder(body)
        fields = dict(reply) if isinstance(reply, dict) else {"content": reply}
        finish = fields.pop("finish_reason", "stop")
        text = fields.get("content") or ""
        payload = json.dumps({
            "id": f"cmpl-{self.served}", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", **fields}}],
            "usage": {"prompt_tokens": sum(len(m["content"].split()) for m in body["messages"]),
                      "completion_tokens": len(text.split()),
                      "total_tokens": 0},
        })
        self.served += 1
        if fault == "truncated":
            payload = payload[: len(payload) // 2]
        return web.Response(text=payload, content_type="application/json")

    async def _start(self) -> None:
        self._slots = asyncio.Semaphore(self.slots) if self.slots else None
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        await self._serve_app(app)


def parser() -> argparse.ArgumentParser:
    """The standalone server's options (every one with its help text)."""
    ap = argparse.ArgumentParser(
        prog="python -m medpress.testing fake-server",
        description="A fake OpenAI-compatible server on 127.0.0.1 for offline runs: every chat "
                    "request gets a short deterministic reply naming its turn. With --judge it "
                    "also answers rubric judge requests with toy verdicts (keyword rules on the "
                    "reply; a toy, not a judge), so one server plays model and judge.")
    ap.add_argument("--port", type=int, default=8011,
                    help="port to listen on, 0 for a free one (default: %(default)s)")
    ap.add_argument("--latency", type=float, default=0.0,
                    help="seconds to wait before each answer (default: %(default)s)")
    ap.add_argument("--judge", action="store_true",
                    help="also play an LLM judge: toy rubric verdicts for judge requests")
    ap.add_argument("--behaviour", metavar="B",
                    help="reply as scripted/B (always_safe, hedger, flip_flop, caves_at_<k>, "
                         "...) instead of a short refusal naming the turn")
    ap.add_argument("--slots", type=int, default=0,
                    help="serve at most this many requests at once, like a GPU server's batch "
                         "slots; 0 for no limit (default: %(default)s)")
    return ap


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    responder = scripted_responder(args.behaviour) if args.behaviour else echo_responder
    server = FakeServer(latency_s=args.latency, port=args.port, record=False, judge=args.judge,
                        responder=responder, slots=args.slots)

    async def forever() -> None:
        await server._start()
        role = "model and toy judge" if args.judge else "model"
        print(f"fake server ({role}) on {server.base_url}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it is meant to stop
        asyncio.run(forever())

