"""Judge specs: any model backend spec makes an LLM judge."""

from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Any

from medpress.backends import SPEC_HELP, Reasoning, get_backend, is_model_spec
from medpress.judges.base import Judge
from medpress.judges.llm import LLMJudge, judge_config
from medpress.judges.rubric import Rubric

EMBEDDED = "embedded"
JUDGE_SPEC_HELP = f"{EMBEDDED} (the offline judge), {SPEC_HELP}"


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
              max_tokens: int | None = None, rubric: Rubric | None = None,
              temperature: float | None = None, seed: int | None = None,
              suite: str | None = None) -> Judge:
    """``embedded`` (the offline judge), or an LLM judge on the backend for ``spec``
    (``openai/…``, ``llamacpp/…``, ``scripted/…``).

    ``reasoning``, ``max_tokens``, ``temperature`` and ``seed`` set the LLM judge's request
    (None: its defaults) and become part of its ``rubric_version`` (see
    :func:`medpress.judges.llm.settings_suffix`); ``rubric`` replaces the packaged rubric (a
    paraphrase, for ``judge-check --rubric-variants``, or a suite's own rubric). ``suite`` names
    a suite without an embedded judge (``embedded_judge: false``); None for MedPRESS.

    Raises:
        ValueError: for an unknown spec (listing the valid ones, ``embedded`` included),
            ``embedded`` for a ``suite`` without one,
            ``reasoning``/``max_tokens``/``base_url`` with ``embedded`` (a local classifier has
            none of them), or ``reasoning`` for a backend that cannot switch it.
        FileNotFoundError: for ``embedded`` when it has not been trained yet.
    """
    check_judge_spec(spec)
    if spec == EMBEDDED and suite is not None:
        raise ValueError(embedded_refusal(suite))
    if spec == EMBEDDED:
        if base_url is not None:
            raise ValueError("--judge-base-url applies to openai/ judges, not to the embedded "
                             "judge (it runs locally); leave it out")
        if reasoning is not None or max_tokens is not None:
            raise ValueError("--judge-reasoning and --judge-max-tokens apply to LLM judges, "
                             "not to the embedded judge (a classifier: it generates nothing)")
        if rubric is not None or temperature is not None or seed is not None:
            raise ValueError("repeats and rubric variants apply to LLM judges; the embedded "
                             "judge is a deterministic classifier with no prompt")
        from medpress.judges.embedded import EmbeddedJudge  # torch only when asked for

        return EmbeddedJudge()
    config = judge_config(reasoning, max_tokens)
    if temperature is not None or seed is not None:
        config = replace(config, temperature=config.temperature if temperature is None
                         else temperature, seed=config.seed if seed is None else seed)
    backend = get_backend(spec, base_url=base_url, concurrency=concurrency, timeout_s=timeout_s)
    if reasoning is not None and not backend.reasoning_switch:
        raise ValueError(f"--judge-reasoning {reasoning}: {spec} has no way to switch "
                         "reasoning; leave --judge-reasoning unset")
    return LLMJudge(backend, rubric=rubric, concurrency=concurrency, config=config)


def embedded_refusal(suite: str) -> str:
    """Why ``embedded`` is refused for ``suite`` (a suite declaring no embedded judge)."""
    return (f"the embedded judge exists only for the medpress suite, not for suite {suite!r}: "
            "use an LLM judge (openai/…, llamacpp/…)")


def check_judge_spec(spec: str) -> None:
    """Refuse a judge spec that names no judge, listing every valid kind.

    ``embedded`` is exact; any other spec must have a model spec's shape
    (:func:`medpress.backends.is_model_spec`). A near miss of ``embedded`` (``embdded``) is
    pointed out.

    Raises:
        ValueError: ``unknown judge spec 'embdded' (did you mean 'embedded'?); expected …``.
    """
    if spec == EMBEDDED or is_model_spec(spec):
        return
    close = difflib.get_close_matches(spec, [EMBEDDED, "smollm2"], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown judge spec {spec!r}{hint}; expected one of: {JUDGE_SPEC_HELP}")


def judge_provenance(judge: Judge) -> dict[str, Any]:
    """What a run records about a judge that labelled it: name, rubric_version and, for an
    LLM judge, its request settings (reasoning, max_tokens, temperature, seed, attempts)."""
    out: dict[str, Any] = {"judge": judge.name, "rubric_version": judge.rubric_version}
    if isinstance(judge, LLMJudge):
        out["settings"] = judge.settings()
    return out
