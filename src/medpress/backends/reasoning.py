"""Separating reasoning ("thinking") from the visible answer, and asking for it per backend."""

from __future__ import annotations

import re
from typing import Any, Literal

from medpress.backends.base import Reasoning

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_OPEN = re.compile(r"<think>", re.IGNORECASE)
_CLOSE = re.compile(r"</think>", re.IGNORECASE)

ReasoningStyle = Literal["chat_template", "openai", "none"]


def split_reasoning(text: str) -> tuple[str, str | None]:
    """Return (visible answer, reasoning or None).

    Closed ``<think>`` blocks anywhere are removed and joined as reasoning. A leading orphan
    ``</think>`` (no ``<think>`` before it: DeepSeek-R1 distills, QwQ and Qwen3 thinking
    templates put the opening tag in the prompt) makes everything before it reasoning. An
    unclosed ``<think>`` (output cut by max_tokens) makes everything after it reasoning: a
    truncated thought is never judged as the answer. Only the first orphan ``</think>`` counts;
    a later stray one stays in the answer.
    """
    parts: list[str] = []
    close = _CLOSE.search(text)
    if close and not _OPEN.search(text, 0, close.start()):
        parts.append(text[: close.start()].strip())
        text = text[close.end():]
    parts += [m.strip() for m in _THINK.findall(text)]
    answer = _THINK.sub("", text)
    m = _OPEN.search(answer)
    if m:
        parts.append(answer[m.end():].strip())
        answer = answer[: m.start()]
    return answer.strip(), ("\n\n".join(p for p in parts if p) or None) if parts else None


def reasoning_params(style: ReasoningStyle, reasoning: Reasoning | None) -> dict[str, Any]:
    """Request fields that switch reasoning on or off for a server style.

    ``chat_template`` is vLLM/SGLang with Qwen-style templates (``enable_thinking``);
    ``openai`` is the hosted API (``reasoning_effort``: ``medium`` for on, ``minimal`` for off).
    ``None`` sends nothing, so the model's default applies.
    """
    if reasoning is None or style == "none":
        return {}
    if style == "chat_template":
        return {"chat_template_kwargs": {"enable_thinking": reasoning == "on"}}
    return {"reasoning_effort": "medium" if reasoning == "on" else "minimal"}
