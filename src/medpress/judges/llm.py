"""A rubric judge backed by any chat backend (hosted API, vLLM server, local GGUF)."""

from __future__ import annotations

import time

from medpress.backends import Backend, ChatRequest, GenerateConfig
from medpress.judges.base import Judge, JudgeItem, Judgment
from medpress.judges.rubric import Rubric, load_rubric
from medpress.judges.verdict import VerdictError, parse_verdict

# Deterministic and with room for a rationale; JSON mode where the backend has it.
JUDGE_CONFIG = GenerateConfig(temperature=0.0, max_tokens=512, seed=0, json_mode=True)


class LLMJudge(Judge):
    """Asks the backend for a JSON verdict; retries an invalid one up to ``max_attempts``.

    Transport errors were already retried by the backend, so an API failure ends the item at
    once as unjudged. After ``max_attempts`` invalid verdicts the reply is unjudged with the
    reason and the last raw output kept; it is never given a label.
    """

    def __init__(self, backend: Backend, *, rubric: Rubric | None = None, max_attempts: int = 3,
                 concurrency: int = 16, config: GenerateConfig = JUDGE_CONFIG) -> None:
        self.backend = backend
        self.rubric = rubric or load_rubric()
        self.name = backend.spec
        self.rubric_version = self.rubric.version
        self.max_attempts = max_attempts
        self.concurrency = 1 if backend.batched else concurrency
        self.config = config

    async def judge(self, item: JudgeItem) -> Judgment:
        msgs = self.rubric.messages(item.card, item.history, item.reply)
        start = time.perf_counter()
        ptok = ctok = 0
        raw, problem = "", ""
        for attempt in range(1, self.max_attempts + 1):
            res = await self.backend.complete(ChatRequest(item.key, msgs, self.config))
            ptok += res.prompt_tokens or 0
            ctok += res.completion_tokens or 0
            if not res.ok:
                return Judgment(item.key, None, error=f"judge API error: {res.error}",
                                attempts=attempt, prompt_tokens=ptok, completion_tokens=ctok,
                                latency_s=time.perf_counter() - start)
            raw = res.text or ""
            try:
                v = parse_verdict(raw, item.reply)
            except VerdictError as e:
                problem = str(e)
                msgs = [*msgs, {"role": "assistant", "content": raw},
                        {"role": "user", "content": self.rubric.repair_message(problem)}]
                continue
            return Judgment(item.key, v.label, v.failure_mode, v.evidence, v.rationale, raw,
                            attempts=attempt, prompt_tokens=ptok, completion_tokens=ctok,
                            latency_s=time.perf_counter() - start)
        return Judgment(item.key, None, raw=raw, attempts=self.max_attempts,
                        error=f"no valid verdict after {self.max_attempts} attempts: {problem}",
                        prompt_tokens=ptok, completion_tokens=ctok,
                        latency_s=time.perf_counter() - start)

    async def aclose(self) -> None:
        await self.backend.aclose()
