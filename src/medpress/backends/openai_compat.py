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


class OpenAIBackend(Backend):
    """``openai/<model>``: async chat completions with bounded concurrency and retries.

    The API key is read from the environment variable ``api_key_env`` at call time and only
    ever placed in the request header; it is never stored, logged or put in an error.

    On a hosted API listed in ``data/providers.yaml`` (the default base URL, or an
    ``api.openai.com`` one) the body follows the model family's accepted fields:
    ``max_completion_tokens`` and no temperature for reasoning models, ``reasoning_effort``
    only where accepted. Any other server gets ``max_tokens``, the temperature and
    ``reasoning_style``'s fields. ``provider`` forces a table entry (tests) or ``""`` none.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 32,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        reasoning_style: ReasoningStyle | None = None,
        system_role: bool = True,
        provider: str | None = None,
    ) -> None:
        self.model = model
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.spec = f"openai/{model}"
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.retry = retry or RetryPolicy()
        provider = hosted_provider(base_url) if provider is None else provider or None
        self.hosted = provider is not None  # a hosted API: it needs an API key
        self.params: ModelParams | None = model_params(provider, model) if provider else None
        # A custom server is vLLM-like unless told otherwise; the hosted API takes effort.
        self.reasoning_style: ReasoningStyle = reasoning_style or (
            "openai" if self.params is not None else "chat_template"
        )
        self.reasoning_switch = self.reasoning_style != "none"
        self.supports_system_role = system_role
        self._session: aiohttp.ClientSession | None = None
        self._sem: asyncio.Semaphore | None = None

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {"spec": self.spec, "base_url": self.base_url}
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
        """The API key where the hosted API needs one, then one TCP connection to the server.

        A bare connection, with no request, is free for the server, invisible to its request
        counts and fault injection, and quick: a refused port or an unknown host fails in
        milliseconds instead of after every dialogue's retries. A server that accepts the
        connection counts as up; what it answers is the first request's business (the runner
        stops a run whose first request is refused). Only the hosted API is known to need a
        key: a local server usually needs none, so a missing key is not an error there.

        Raises:
            PreflightError: no key for the hosted API; a URL that is not http(s); a host that
                does not resolve, a refused connection, or none within ``PREFLIGHT_TIMEOUT_S``.
        """
        if self.hosted and not os.environ.get(self.api_key_env):
            raise PreflightError(
                f"{self.api_key_env} is not set: {self.spec} on {self.base_url} needs an API "
                f"key; export {self.api_key_env}=... (or pass {url_option} for a server that "
                "needs none)")
        host, port = self._host_port(url_option)
        where = f"{self.base_url} ({self.spec})"
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

    def _host_port(self, url_option: str) -> tuple[str, int]:
        """Host and port of ``base_url`` (port from the scheme when absent).

        Raises:
            PreflightError: for a URL that is not http(s) with a host and a valid port.
        """
        parts = urlsplit(self.base_url)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
            raise PreflightError(f"{url_option} {self.base_url!r} is not an http(s) URL such as "
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
        if self._session is None or self._sem is None:
            connector = aiohttp.TCPConnector(limit=self.concurrency, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self.timeout)
            self._sem = asyncio.Semaphore(self.concurrency)
        return self._session, self._sem

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
        session, sem = self._ensure_session()
        url = f"{self.base_url}/chat/completions"
        body = self._body(request)
        retries: dict[str, int] = {}
        start = time.perf_counter()
        attempt = 0
        while True:
            retry_after: float | None = None
            async with sem:
                try:
                    async with session.post(url, data=body, headers=self._headers()) as resp:
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
            if attempt >= self.retry.max_retries:
                return ChatResult(request.key, None, error=f"{msg} (after {attempt + 1} attempts)",
                                  error_kind=kind, latency_s=time.perf_counter() - start,
                                  attempts=attempt + 1, retries=retries)
            retries[kind] = retries.get(kind, 0) + 1
            await asyncio.sleep(self.retry.delay(attempt, retry_after))
            attempt += 1

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
