"""Judge specs: any model backend spec makes an LLM judge."""

from __future__ import annotations

from medpress.backends import get_backend
from medpress.judges.base import Judge
from medpress.judges.llm import LLMJudge


def get_judge(spec: str, *, base_url: str | None = None, concurrency: int = 16,
              timeout_s: float = 120.0) -> Judge:
    """``embedded`` (the offline judge), or an LLM judge on the backend for ``spec``
    (``openai/…``, ``llamacpp/…``, ``scripted/…``).

    Raises:
        ValueError: for an unknown spec.
        FileNotFoundError: for ``embedded`` when it has not been trained yet.
    """
    if spec == "embedded":
        from medpress.judges.embedded import EmbeddedJudge  # torch only when asked for

        return EmbeddedJudge()
    backend = get_backend(spec, base_url=base_url, concurrency=concurrency, timeout_s=timeout_s)
    return LLMJudge(backend, concurrency=concurrency)
