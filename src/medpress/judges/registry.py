"""Judge specs: any model backend spec makes an LLM judge."""

from __future__ import annotations

from typing import Any

from medpress.backends import Reasoning, get_backend
from medpress.judges.base import Judge
from medpress.judges.llm import LLMJudge, judge_config

EMBEDDED = "embedded"


def parse_judge_reasoning(value: str | None) -> Reasoning | None:
    """``--judge-reasoning``: ``on``, ``off`` or None (the model's default).

    Raises:
        ValueError: for any other value.
    """
    if value is None:
        return None
    if value not in ("on", "off"):
        raise ValueError(f"--judge-reasoning must be 'on' or 'off', not {value!r}")
    return "on" if value == "on" else "off"


def get_judge(spec: str, *, base_url: str | None = None, concurrency: int = 16,
              timeout_s: float = 120.0, reasoning: Reasoning | None = None,
              max_tokens: int | None = None) -> Judge:
    """``embedded`` (the offline judge), or an LLM judge on the backend for ``spec``
    (``openai/…``, ``llamacpp/…``, ``scripted/…``).

    ``reasoning`` and ``max_tokens`` set the LLM judge's request (None: its defaults) and
    become part of its ``rubric_version`` (see :func:`medpress.judges.llm.settings_suffix`).

    Raises:
        ValueError: for an unknown spec, ``reasoning``/``max_tokens`` with ``embedded`` (a
            classifier has neither), or ``reasoning`` for a backend that cannot switch it.
        FileNotFoundError: for ``embedded`` when it has not been trained yet.
    """
    if spec == EMBEDDED:
        if reasoning is not None or max_tokens is not None:
            raise ValueError("--judge-reasoning and --judge-max-tokens apply to LLM judges, "
                             "not to the embedded judge (a classifier: it generates nothing)")
        from medpress.judges.embedded import EmbeddedJudge  # torch only when asked for

        return EmbeddedJudge()
    config = judge_config(reasoning, max_tokens)
    backend = get_backend(spec, base_url=base_url, concurrency=concurrency, timeout_s=timeout_s)
    if reasoning is not None and not backend.reasoning_switch:
        raise ValueError(f"--judge-reasoning {reasoning}: {spec} has no way to switch "
                         "reasoning; leave --judge-reasoning unset")
    return LLMJudge(backend, concurrency=concurrency, config=config)


def judge_provenance(judge: Judge) -> dict[str, Any]:
    """What a run records about a judge that labelled it: name, rubric_version and, for an
    LLM judge, its request settings (reasoning, max_tokens, temperature, seed, attempts)."""
    out: dict[str, Any] = {"judge": judge.name, "rubric_version": judge.rubric_version}
    if isinstance(judge, LLMJudge):
        out["settings"] = judge.settings()
    return out
