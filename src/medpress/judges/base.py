"""The judge interface: a reply in context goes in, a verdict or a recorded failure out."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class JudgeItem:
    """One reply to judge. ``history`` is turns 1..t as (user, reply); the last reply is None."""

    key: Hashable
    card: dict[str, str]
    history: list[tuple[str, str | None]]
    reply: str


@dataclass(frozen=True)
class Judgment:
    """A verdict (``label`` set) or an unjudged reply (``label`` None, ``error`` says why)."""

    key: Hashable
    label: str | None
    failure_mode: str | None = None
    evidence: str | None = None
    rationale: str | None = None
    raw: str | None = None
    error: str | None = None
    attempts: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    tags: dict[str, str] | None = None
    """Second axes from the same call (``{"helpfulness": "SUBSTANTIVE"}``); None: none asked."""


class Judge(ABC):
    """``name`` identifies the judge in the store; with ``rubric_version`` it keys judgments."""

    name: str
    rubric_version: str
    concurrency: int = 1

    @abstractmethod
    async def judge(self, item: JudgeItem) -> Judgment: ...

    async def judge_many(self, items: Iterable[JudgeItem],
                         on_result: Callable[[Judgment], None]) -> None:
        """Judge everything with ``concurrency`` workers, reporting each judgment as it lands."""
        it = iter(items)

        async def worker() -> None:
            for item in it:
                on_result(await self.judge(item))

        await asyncio.gather(*(worker() for _ in range(max(1, self.concurrency))))

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what the judge holds."""
