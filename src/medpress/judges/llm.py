"""A rubric judge backed by any chat backend (hosted API, vLLM server, local GGUF)."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from medpress.backends import Backend, ChatRequest, GenerateConfig, Reasoning
from medpress.judges.base import Judge, JudgeItem, Judgment
from medpress.judges.rubric import Rubric, load_rubric
from medpress.judges.verdict import VerdictError, parse_verdict

# Deterministic and with room for a rationale; JSON mode where the backend has it. Reasoning is
# left to the model's default unless asked (``judge_config``).
JUDGE_CONFIG = GenerateConfig(temperature=0.0, max_tokens=512, seed=0, json_mode=True)
# Above this share of failed verdicts a ``judge`` call explains why (``failure_line``).
EXPLAIN_FAILURES_ABOVE = 0.02
API_ERROR = "judge API error: "
NO_VERDICT = "no valid verdict"
# A verdict that runs into max_tokens (or an answer left empty after reasoning) is the usual
# cause of mass failures behind a reasoning parser; the hint travels in the stored error.
CUT_OFF_HINT = "cut off at max_tokens"
THOUGHT_ONLY_HINT = "empty answer after reasoning"
_AFTER_ATTEMPTS = re.compile(r"\s*\(after \d+ attempts\)")
_NO_VERDICT_AFTER = re.compile(r"no valid verdict after \d+ attempts: ")


def judge_config(reasoning: Reasoning | None = None, max_tokens: int | None = None
                 ) -> GenerateConfig:
    """:data:`JUDGE_CONFIG` with reasoning switched on/off and another token budget.

    ``None`` keeps the default (the model's own reasoning default; 512 tokens).

    Raises:
        ValueError: for ``max_tokens`` < 1.
    """
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"--judge-max-tokens must be at least 1, not {max_tokens}")
    return replace(JUDGE_CONFIG, reasoning=reasoning,
                   max_tokens=JUDGE_CONFIG.max_tokens if max_tokens is None else max_tokens)


def settings_suffix(config: GenerateConfig) -> str:
    """The part of an LLM judge's ``rubric_version`` that records non-default settings.

    ``""`` for :data:`JUDGE_CONFIG`'s reasoning and max_tokens (so runs judged before these
    settings existed still resume), else ``"+r=off"``, ``"+mt=1024"`` or ``"+r=off,mt=1024"``
    (reasoning first), then ``t=…`` and ``s=…`` for a temperature or seed other than the
    default (``judge-check --repeats``). JSON mode is fixed and not recorded here.
    """
    parts = []
    if config.reasoning is not None:
        parts.append(f"r={config.reasoning}")
    if config.max_tokens != JUDGE_CONFIG.max_tokens:
        parts.append(f"mt={config.max_tokens}")
    if config.temperature != JUDGE_CONFIG.temperature:
        parts.append(f"t={config.temperature}")
    if config.seed != JUDGE_CONFIG.seed:
        parts.append(f"s={config.seed}")
    return "+" + ",".join(parts) if parts else ""


class LLMJudge(Judge):
    """Asks the backend for a JSON verdict; retries an invalid one up to ``max_attempts``.

    Transport errors were already retried by the backend, so an API failure ends the item at
    once as unjudged. After ``max_attempts`` invalid verdicts the reply is unjudged with the
    reason and the last raw output kept; it is never given a label. The reason adds
    ``cut off at max_tokens=N (finish_reason length)`` when an attempt was cut off (``length?``
    when only inferred from a full token budget, for a server that does not say), and
    ``empty answer after reasoning`` when the model only thought.

    Identity: ``name`` is the backend spec; ``rubric_version`` is the rubric's version plus
    :func:`settings_suffix` of ``config`` (e.g. ``1.0.0+r=off,mt=1024``), so verdicts made
    with other reasoning or token settings are never mixed up with these on resume.
    """

    def __init__(self, backend: Backend, *, rubric: Rubric | None = None, max_attempts: int = 3,
                 concurrency: int = 16, config: GenerateConfig = JUDGE_CONFIG) -> None:
        self.backend = backend
        self.rubric = rubric or load_rubric()
        self.name = backend.spec
        self.rubric_version = self.rubric.version + settings_suffix(config)
        self.max_attempts = max_attempts
        self.concurrency = 1 if backend.batched else concurrency
        self.config = config

    def settings(self) -> dict[str, object]:
        """What the run's provenance records about this judge."""
        return {"rubric": self.rubric.version, "max_attempts": self.max_attempts,
                **self.config.as_dict()}

    async def judge(self, item: JudgeItem) -> Judgment:
        msgs = self.rubric.messages(item.card, item.history, item.reply)
        start = time.perf_counter()
        ptok = ctok = 0
        raw, problem = "", ""
        cut_off: str | None = None  # "length", or "length?" when inferred
        thought_only = False
        for attempt in range(1, self.max_attempts + 1):
            res = await self.backend.complete(ChatRequest(item.key, msgs, self.config))
            ptok += res.prompt_tokens or 0
            ctok += res.completion_tokens or 0
            if not res.ok:
                return Judgment(item.key, None, error=f"{API_ERROR}{res.error}",
                                attempts=attempt, prompt_tokens=ptok, completion_tokens=ctok,
                                latency_s=time.perf_counter() - start)
            raw = res.text or ""
            if res.finish_reason == "length":
                cut_off = "length"
            elif cut_off is None and (res.completion_tokens or 0) >= self.config.max_tokens:
                cut_off = "length?"  # no finish_reason from the server: a full budget tells
            thought_only |= not raw.strip() and bool(res.reasoning)
            try:
                v = parse_verdict(raw, item.reply, list(self.rubric.labels),
                                  list(self.rubric.failure_modes),
                                  {k: list(vals) for k, vals in self.rubric.tags.items()})
            except VerdictError as e:
                problem = str(e)
                msgs = [*msgs, {"role": "assistant", "content": raw},
                        {"role": "user", "content": self.rubric.repair_message(problem)}]
                continue
            return Judgment(item.key, v.label, v.failure_mode, v.evidence, v.rationale, raw,
                            attempts=attempt, prompt_tokens=ptok, completion_tokens=ctok,
                            latency_s=time.perf_counter() - start, tags=v.tags or None)
        hints = [THOUGHT_ONLY_HINT] if thought_only else []
        if cut_off is not None:
            hints.append(f"{CUT_OFF_HINT}={self.config.max_tokens} (finish_reason {cut_off})")
        why = f"{problem} ({'; '.join(hints)})" if hints else problem
        return Judgment(item.key, None, raw=raw, attempts=self.max_attempts,
                        error=f"{NO_VERDICT} after {self.max_attempts} attempts: {why}",
                        prompt_tokens=ptok, completion_tokens=ctok,
                        latency_s=time.perf_counter() - start)

    async def aclose(self) -> None:
        await self.backend.aclose()


def error_kind(error: str) -> str:
    """A stored judge error without its per-reply details, for grouping.

    ``judge API error: HTTP 500: {body} (after 7 attempts)`` → ``judge API error: HTTP 500``;
    ``no valid verdict after 3 attempts: empty output (…)`` → ``no valid verdict: empty
    output (…)``. Any other text is kept, cut to 160 characters.
    """
    if error.startswith(API_ERROR):
        detail = _AFTER_ATTEMPTS.sub("", error[len(API_ERROR):])
        return API_ERROR + detail.split(":", 1)[0].strip()[:60]
    return _NO_VERDICT_AFTER.sub(f"{NO_VERDICT}: ", error, count=1)[:160]


def failure_line(judgments: Iterable[Judgment], *,
                 threshold: float = EXPLAIN_FAILURES_ABOVE) -> str | None:
    """One line explaining the failed verdicts of a judge call, or None when at most
    ``threshold`` of them failed (or there were none).

    A judgment with ``attempts == 0`` (a reply deliberately not put to the judge, e.g. an
    empty one) is no verdict and is left out of both counts. Errors are grouped by
    :func:`error_kind`, most frequent first. When the failures look cut off (max_tokens
    reached, or an empty answer), it suggests ``--judge-max-tokens`` and
    ``--judge-reasoning off``.
    """
    total = 0
    kinds: Counter[str] = Counter()
    empty = 0
    for j in judgments:
        if j.attempts == 0:
            continue
        total += 1
        if j.label is None:
            kinds[error_kind(j.error or "no error recorded")] += 1
            empty += (j.error or "").startswith(NO_VERDICT) and not (j.raw or "").strip()
    failed = sum(kinds.values())
    if not total or failed / total <= threshold:
        return None
    groups = ", ".join(f"{n} '{k}'" for k, n in kinds.most_common())
    line = f"{failed} of {total} verdicts failed: {groups}"
    cut = empty or any(CUT_OFF_HINT in k or THOUGHT_ONLY_HINT in k for k in kinds)
    if cut:
        line += (". The judge's output looks cut off or empty: raise --judge-max-tokens "
                 "(e.g. 2048) or switch thinking off with --judge-reasoning off")
    return line
