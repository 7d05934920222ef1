"""The one small interface every model backend implements."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from medpress.conditions import Message

Reasoning = Literal["on", "off"]


class PreflightError(ValueError):
    """A backend cannot work at all (no API key, server unreachable): one line saying which
    setting to fix. A ``ValueError`` so the CLI prints it as a clean error."""


@dataclass(frozen=True)
class GenerateConfig:
    """Sampling parameters, recorded with every run.

    ``max_tokens`` of 384 leaves room for a full answer of the length the references have
    (about 60-120 words) while keeping small local models fast. ``reasoning=None`` leaves the
    model's default; ``json_mode`` asks for a JSON object where the backend supports it.
    """

    temperature: float = 0.0
    max_tokens: int = 384
    seed: int | None = 0
    reasoning: Reasoning | None = None
    json_mode: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens,
                "seed": self.seed, "reasoning": self.reasoning, "json_mode": self.json_mode}

    def with_seed(self, seed: int | None) -> GenerateConfig:
        return replace(self, seed=seed)


@dataclass(frozen=True)
class ChatRequest:
    """One model call. ``key`` is opaque to the backend and comes back on the result.

    ``session`` names the conversation the call belongs to and ``final`` marks its last call,
    so a backend that caches a conversation's state (llama.cpp's KV cache) can keep it for
    the next turn and free it afterwards. Backends without such state ignore both.
    """

    key: Hashable
    messages: list[Message]
    config: GenerateConfig = field(default_factory=GenerateConfig)
    session: Hashable | None = None
    final: bool = True


@dataclass(frozen=True)
class ChatResult:
    """A reply or an error, never both. ``error_kind`` is a short machine-readable class.

    ``finish_reason`` is the server's (``stop``, ``length`` when max_tokens cut the reply …),
    None where the backend does not say. A reply may be empty (``text`` "" or None with no
    error): a thinking model that spent every token inside ``<think>``.
    """

    key: Hashable
    text: str | None
    reasoning: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    error: str | None = None
    error_kind: str | None = None
    attempts: int = 1
    retries: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None


class Backend(ABC):
    """A model behind a spec such as ``openai/gpt-4.1-mini`` or ``scripted/always_safe``.

    Concurrent backends (HTTP) implement :meth:`complete`; the runner keeps up to
    ``concurrency`` calls in flight, with no per-turn barrier and more dialogues in progress
    than slots. Batch engines set ``batched = True`` and override :meth:`complete_batch`; the
    runner then hands them every pending request of one turn at once. Either way results are
    yielded as they finish.
    """

    batched: ClassVar[bool] = False
    supports_system_role: bool = True
    # Whether GenerateConfig.reasoning reaches the model; if not, check_config refuses it.
    reasoning_switch: bool = False
    spec: str = ""
    # Most requests the backend can serve at once (e.g. its worker count); None = no limit.
    max_concurrency: int | None = None
    # Servers sharing the load, each taking ``concurrency`` requests: the runner keeps
    # ``concurrency * replicas`` in flight.
    replicas: int = 1

    @abstractmethod
    async def complete(self, request: ChatRequest) -> ChatResult: ...

    async def complete_batch(self, requests: Sequence[ChatRequest]) -> AsyncIterator[ChatResult]:
        """Default: run :meth:`complete` concurrently and yield in completion order."""
        for fut in asyncio.as_completed([self.complete(r) for r in requests]):
            yield await fut

    def check_config(self, config: GenerateConfig) -> list[str]:
        """Refuse settings this backend would silently drop; return warnings for the user.

        Raises:
            ValueError: naming the option and the backend, e.g. ``--reasoning`` for a backend
                with no way to switch reasoning.
        """
        if config.reasoning is not None and not self.reasoning_switch:
            raise ValueError(f"--reasoning {config.reasoning}: {self.spec or type(self).__name__} "
                             "has no way to switch reasoning; leave --reasoning unset")
        return []

    async def preflight(self, url_option: str = "--base-url") -> None:  # noqa: B027 - optional
        """Check, once and cheaply, that the backend can work before a run starts.

        Default: nothing to check (in-process backends). ``url_option`` is the CLI option that
        sets the server, named in the error (``--base-url``, ``--judge-base-url``).

        Raises:
            PreflightError: naming what is missing and what to do.
        """

    def identity(self) -> dict[str, Any]:
        """What identifies the model for provenance (never secrets)."""
        return {"spec": self.spec}

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections or model memory."""
