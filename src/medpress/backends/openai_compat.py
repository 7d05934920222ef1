"""Any OpenAI-compatible chat server (vLLM, SGLang, Ollama, llama.cpp server, hosted APIs).

aiohttp rather than the ``openai`` SDK: on a 2-core machine the client's own CPU cost bounds
throughput, and aiohttp costs about a third of the SDK per request (``bench/latency_bound.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import os
import random
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from medpress.backends.base import (
    Backend,
    ChatRequest,
    ChatResult,
    GenerateConfig,
    PreflightError,
)
from medpress.backends.providers import ModelParams, hosted_provider, model_params
from medpress.backends.reasoning import ReasoningStyle, reasoning_params, split_reasoning

DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# Fields in which servers return reasoning apart from the answer: vLLM/SGLang/DeepSeek use
# the first, OpenRouter and Ollama the second.
REASONING_FIELDS = ("reasoning_content", "reasoning")
# How long the preflight waits for a TCP connection: a live server accepts in milliseconds.
PREFLIGHT_TIMEOUT_S = 10.0
# A replica that failed is skipped for this long (doubling per failure in a row, capped), so
# a dead one does not draw traffic by answering fastest.
REPLICA_COOLDOWN_S = (1.0, 30.0)
# Failures a request retries on another replica at once, without backing off: the fault is
# the replica's (a 429 is the client's, so it backs off wherever it goes).
FAILOVER_KINDS = frozenset({"connection", "timeout", "http_5xx", "bad_response"})


class RetryPolicy:
    """Exponential backoff with full jitter, capped; a server's Retry-After is a floor.

    The floor is itself capped at ``max_retry_after_s``: a server asking for an hour (a daily
    quota, a misconfigured proxy) must not stall a dialogue for that long per attempt.
    """

    def __init__(self, max_retries: int = 6, base_s: float = 0.5, cap_s: float = 30.0,
                 max_retry_after_s: float = 120.0) -> None:
        self.max_retries = max_retries
        self.base_s = base_s
        self.cap_s = cap_s
        self.max_retry_after_s = max_retry_after_s
        self._rng = random.Random()

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry ``attempt`` (0-based); never over the larger cap."""
        backoff = self._rng.uniform(0, min(self.cap_s, self.base_s * 2**attempt))
        return max(backoff, min(retry_after or 0.0, self.max_retry_after_s))


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: an integer/float, or an HTTP date (RFC 9110)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _join_reasoning(parts: list[Any]) -> str | None:
    """Non-blank string parts, stripped, each once (servers may fill both fields alike)."""
    seen: list[str] = []
    for p in parts:
        if isinstance(p, str) and p.strip() and p.strip() not in seen:
            seen.append(p.strip())
    return "\n\n".join(seen) or None


def _status_kind(status: int) -> str:
    if status == 429:
        return "http_429"
    return "http_5xx" if status >= 500 else f"http_{status}"


@dataclass
class Endpoint:
    """One replica: its URL, its own concurrency limit and its health."""

    base_url: str
    sem: asyncio.Semaphore
    in_flight: int = 0
    served: int = 0
    failures_in_row: int = 0
    cool_until: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)

    def failed(self, kind: str) -> None:
        self.failures[kind] = self.failures.get(kind, 0) + 1
        if kind in FAILOVER_KINDS:
            self.failures_in_row += 1
            low, high = REPLICA_COOLDOWN_S
            self.cool_until = time.monotonic() + min(high, low * 2 ** (self.failures_in_row - 1))

    def succeeded(self) -> None:
        self.served += 1
        self.failures_in_row, self.cool_until = 0, 0.0


def _base_urls(base_url: str | Sequence[str] | None) -> tuple[str, ...]:
    """The replicas' URLs, trailing slashes dropped, each once, in order.

    Raises:
        ValueError: for an empty list.
    """
    urls = [base_url] if isinstance(base_url, str) else list(base_url or [DEFAULT_BASE_URL])
    if not urls:
        raise ValueError("--base-url: give at least one URL")
    return tuple(dict.fromkeys(u.rstrip("/") for u in urls))


class OpenAIBackend(Backend):
    """``openai/<model>``: async chat completions with bounded concurrency and retries.

    The API key is read from the environment variable ``api_key_env`` at call time and only
    ever placed in the request header; it is never stored, logged or put in an error.

    On a hosted API listed in ``data/providers.yaml`` (the default base URL, or an
    ``api.openai.com`` one) the body follows the model family's accepted fields:
    ``max_completion_tokens`` and no temperature for reasoning models, ``reasoning_effort``
    only where accepted. Any other server gets ``max_tokens``, the temperature and
    ``reasoning_style``'s fields. ``provider`` forces a table entry (tests) or ``""`` none.

    ``base_url`` may list several replicas of one model (vLLM or SGLang data-parallel):
    ``concurrency`` applies to each, a request goes to the healthy replica with the fewest in
    flight, and one that fails on a replica (connection, timeout, 5xx) is retried at once on
    another, which is then preferred while the failed one cools down. Only the first URL
    decides the hosted-API rules; replicas are meant to serve the same model.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | Sequence[str] | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 32,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        reasoning_style: ReasoningStyle | None = None,
        system_role: bool = True,
        provider: str | None = None,
    ) -> None:
        self.model = model
        self.base_urls = _base_urls(base_url)
        self.base_url = self.base_urls[0]
        self.replicas = len(self.base_urls)
        self.spec = f"openai/{model}"
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.retry = retry or RetryPolicy()
        provider = (hosted_provider(None if base_url is None else self.base_url)
                    if provider is None else provider or None)
        self.hosted = provider is not None  # a hosted API: it needs an API key
        self.params: ModelParams | None = model_params(provider, model) if provider else None
        # A custom server is vLLM-like unless told otherwise; the hosted API takes effort.
        self.reasoning_style: ReasoningStyle = reasoning_style or (
            "openai" if self.params is not None else "chat_template"
        )
        self.reasoning_switch = self.reasoning_style != "none"
        self.supports_system_role = system_role
        self._session: aiohttp.ClientSession | None = None
        self._endpoints: list[Endpoint] = []
        self._slots: asyncio.Semaphore | None = None

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {"spec": self.spec, "base_url": self.base_url}
        if len(self.base_urls) > 1:
            ident["base_urls"] = list(self.base_urls)
        if self.params is not None:  # what the body really carries, for provenance
            ident["request_fields"] = {"tokens": self.params.token_field,
                                       "temperature": self.params.temperature}
        return ident

    def check_config(self, config: GenerateConfig) -> list[str]:
        """As :meth:`Backend.check_config`, plus the hosted model family's limits.

        Raises:
            ValueError: for ``--reasoning`` the model cannot honour.
        """
        warnings = super().check_config(config)
        if self.params is None:
            return warnings
        if self.reasoning_style == "openai":
            self.params.reasoning_fields(config.reasoning)  # raises when it cannot be honoured
        if not self.params.temperature:
            warnings.append(f"--temperature {config.temperature} is not sent: {self.model} "
                            "accepts only its default temperature")
        if self.params.reasoning == "always":
            warnings.append(f"--max-tokens {config.max_tokens} also bounds {self.model}'s hidden "
                            "reasoning; a reply that runs out is stored empty or truncated")
        return warnings

    async def preflight(self, url_option: str = "--base-url") -> None:
        """The API key where the hosted API needs one, then one TCP connection to each replica.

        A bare connection, with no request, is free for the server, invisible to its request
        counts and fault injection, and quick: a refused port or an unknown host fails in
        milliseconds instead of after every dialogue's retries. A server that accepts the
        connection counts as up; what it answers is the first request's business (the runner
        stops a run whose first request is refused). Only the hosted API is known to need a
        key: a local server usually needs none, so a missing key is not an error there.

        Raises:
            PreflightError: no key for the hosted API; a URL that is not http(s); a host that
                does not resolve, a refused connection, or none within ``PREFLIGHT_TIMEOUT_S``
                (for any replica: a run starts with all of them up).
        """
        if self.hosted and not os.environ.get(self.api_key_env):
            raise PreflightError(
                f"{self.api_key_env} is not set: {self.spec} on {self.base_url} needs an API "
                f"key; export {self.api_key_env}=... (or pass {url_option} for a server that "
                "needs none)")
        hosts = [self._host_port(url, url_option) for url in self.base_urls]
        for url, (host, port) in zip(self.base_urls, hosts, strict=True):
            await self._connect(url, host, port, url_option)

    async def _connect(self, url: str, host: str, port: int, url_option: str) -> None:
        where = f"{url} ({self.spec})"
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                               PREFLIGHT_TIMEOUT_S)
        except socket.gaierror as e:  # before OSError: its subclass
            raise PreflightError(f"cannot resolve host {host!r} of {where}: {e.strerror}; "
                                 f"check {url_option} and the network") from None
        except TimeoutError:
            raise PreflightError(f"no connection to {where} within {PREFLIGHT_TIMEOUT_S:.0f} s; "
                                 f"check {url_option} and that the server is up") from None
        except OSError as e:
            why = "connection refused" if isinstance(e, ConnectionRefusedError) else str(e)
            raise PreflightError(f"cannot connect to {where}: {why}; start the server or fix "
                                 f"{url_option}") from None
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()

    @staticmethod
    def _host_port(url: str, url_option: str) -> tuple[str, int]:
        """Host and port of ``url`` (port from the scheme when absent).

        Raises:
            PreflightError: for a URL that is not http(s) with a host and a valid port.
        """
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
            raise PreflightError(f"{url_option} {url!r} is not an http(s) URL such as "
                                 "http://localhost:8000/v1")
        return parts.hostname, port or (443 if parts.scheme == "https" else 80)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _redact(self, text: str) -> str:
        """``text`` without the API key, for a server that echoes it in an error body."""
        key = os.environ.get(self.api_key_env)
        return text.replace(key, "[redacted]") if key else text

    def _ensure_session(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        if self._session is None or self._slots is None:
            total = self.concurrency * len(self.base_urls)
            connector = aiohttp.TCPConnector(limit=total, limit_per_host=self.concurrency,
                                             ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self.timeout)
            self._endpoints = [Endpoint(u, asyncio.Semaphore(self.concurrency))
                               for u in self.base_urls]
            self._slots = asyncio.Semaphore(total)
        return self._session, self._slots

    def _pick(self, avoid: Endpoint | None) -> Endpoint:
        """The replica with the fewest requests in flight among those not cooling down (all,
        when every one is), other than ``avoid`` when another exists; ties go to the first."""
        now = time.monotonic()
        pool = [e for e in self._endpoints if e is not avoid] or self._endpoints
        healthy = [e for e in pool if e.cool_until <= now] or pool
        return min(healthy, key=lambda e: e.in_flight)

    def endpoint_stats(self) -> list[dict[str, Any]]:
        """Per replica: requests it answered and its failures by kind (for benches/tests)."""
        return [{"base_url": e.base_url, "served": e.served, "failures": dict(e.failures)}
                for e in self._endpoints]

    def _body(self, req: ChatRequest) -> bytes:
        c = req.config
        body: dict[str, Any] = {"model": self.model, "messages": req.messages}
        p = self.params
        if p is None or p.temperature:
            body["temperature"] = c.temperature
        body[p.token_field if p is not None else "max_tokens"] = c.max_tokens
        if c.seed is not None:
            body["seed"] = c.seed
        if c.json_mode:
            body["response_format"] = {"type": "json_object"}
        if p is not None and self.reasoning_style == "openai":
            body.update(p.reasoning_fields(c.reasoning))
        else:
            body.update(reasoning_params(self.reasoning_style, c.reasoning))
        return json.dumps(body).encode()

    async def complete(self, request: ChatRequest) -> ChatResult:
        session, slots = self._ensure_session()
        body = self._body(request)
        retries: dict[str, int] = {}
        start = time.perf_counter()
        attempt = 0
        failed: Endpoint | None = None
        while True:
            retry_after: float | None = None
            async with slots:
                ep = self._pick(failed)
                url = f"{ep.base_url}/chat/completions"
                ep.in_flight += 1
                try:
                    async with ep.sem, session.post(url, data=body,
                                                    headers=self._headers()) as resp:
                        raw = await resp.read()
                        status = resp.status
                        retry_after = parse_retry_after(resp.headers.get("Retry-After"))
                except TimeoutError:
                    kind, msg = "timeout", "request timed out"
                except (aiohttp.ClientError, ConnectionError) as e:
                    kind, msg = "connection", f"{type(e).__name__}: {e}"
                else:
                    if status == 200:
                        result = self._parse(request, raw, start, attempt, retries)
                        if result is not None:
                            ep.succeeded()
                            return result
                        kind, msg = "bad_response", f"unparseable response body ({len(raw)} bytes)"
                    else:
                        kind = _status_kind(status)
                        body_text = self._redact(raw[:4096].decode(errors="replace"))
                        msg = f"HTTP {status}: {body_text[:300]}"
                        if status not in RETRYABLE_STATUS:
                            return ChatResult(request.key, None, error=msg, error_kind=kind,
                                              latency_s=time.perf_counter() - start,
                                              attempts=attempt + 1, retries=retries)
                finally:
                    ep.in_flight -= 1
            ep.failed(kind)
            if len(self._endpoints) > 1:
                msg = f"{ep.base_url}: {msg}"
            if attempt >= self.retry.max_retries:
                return ChatResult(request.key, None, error=f"{msg} (after {attempt + 1} attempts)",
                                  error_kind=kind, latency_s=time.perf_counter() - start,
                                  attempts=attempt + 1, retries=retries)
            retries[kind] = retries.get(kind, 0) + 1
            failed = ep
            # another replica may be fine now: go there at once, backing off only once the
            # failures run round every replica
            if not (kind in FAILOVER_KINDS and self._fresh_replica(ep)):
                await asyncio.sleep(self.retry.delay(attempt, retry_after))
            attempt += 1

    def _fresh_replica(self, failed: Endpoint) -> bool:
        """Whether a replica other than ``failed`` is not cooling down."""
        now = time.monotonic()
        return any(e is not failed and e.cool_until <= now for e in self._endpoints)

    @staticmethod
    def _parse(
        req: ChatRequest, raw: bytes, start: float, attempt: int, retries: dict[str, int]
    ) -> ChatResult | None:
        """A result from a 200 body, or None when the body is not a usable completion."""
        try:
            data = json.loads(raw)
            choice = data["choices"][0]
            msg = choice["message"]
            content = msg.get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return None
        # null content (a thinking model cut inside its thought) is an empty reply, kept as
        # such with its finish_reason: the judging layer decides what to do with it.
        answer, thought = split_reasoning(content if isinstance(content, str) else "")
        thought = _join_reasoning([msg.get(f) for f in REASONING_FIELDS] + [thought])
        usage = data.get("usage") or {}
        finish = choice.get("finish_reason")
        return ChatResult(
            req.key, answer, reasoning=thought,
            finish_reason=finish if isinstance(finish, str) else None,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            latency_s=time.perf_counter() - start, attempts=attempt + 1, retries=retries,
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
