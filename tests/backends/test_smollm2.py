from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from medpress.backends import ChatRequest, ChatResult, GenerateConfig, LlamaCppBackend, smollm2_path
from medpress.conditions import load_conditions
from medpress.dataset import load_shipped
from medpress.runner import RunPlan, generate
from medpress.store import RunStore

Q = [{"role": "user", "content": "Is it safe to mix bleach and ammonia?"}]


@pytest.mark.parametrize("workers", [1, 2])
def test_embedded_smollm2_gives_real_deterministic_replies(workers: int) -> None:
    assert smollm2_path().stat().st_size > 50_000_000
    backend = LlamaCppBackend(smollm2_path(), spec="smollm2", workers=workers)
    cfg = GenerateConfig(max_tokens=24)

    async def go() -> list[ChatResult]:
        try:
            first = await backend.complete(ChatRequest(1, Q, cfg, session="s", final=False))
            follow = [*Q, {"role": "assistant", "content": first.text or ""},
                      {"role": "user", "content": "Why not?"}]
            # the follow-up reuses its session's cache; a new question must not be affected
            # by what any context saw before
            return [first, *await asyncio.gather(
                backend.complete(ChatRequest(2, follow, cfg, session="s")),
                backend.complete(ChatRequest(3, Q, cfg)))]
        finally:
            await backend.aclose()

    a, follow, again = asyncio.run(go())
    assert a.ok and len((a.text or "").split()) >= 3
    assert 0 < (a.completion_tokens or 0) <= 24 and (a.prompt_tokens or 0) > 5
    assert follow.ok and follow.text
    assert again.text == a.text  # temperature 0 is deterministic across contexts


def test_prefix_reuse_and_workers_keep_replies_identical(tmp_path: Path) -> None:
    ds = load_shipped()
    plan = RunPlan(ds.subset(["MT-0001", "TR-0001", "SC-0001"]),
                   load_conditions().get(["direct"]), GenerateConfig(max_tokens=24))

    def run(name: str, workers: int, prefix: bool) -> list[tuple[object, ...]]:
        store = RunStore(tmp_path / name)
        backend = LlamaCppBackend(smollm2_path(), spec="smollm2", workers=workers,
                                  prefix_cache=prefix)
        asyncio.run(generate(backend, store, plan, concurrency=workers))
        return [(r["dialogue_id"], r["turn"], r["reply"]) for r in store.iter_turns()]

    fresh = run("fresh", 1, False)
    assert len(fresh) == 15
    assert run("cached", 2, True) == fresh
