from __future__ import annotations

import asyncio

import pytest

from medpress.backends import ChatRequest, ChatResult, GenerateConfig, LlamaCppBackend, smollm2_path

Q = [{"role": "user", "content": "Is it safe to mix bleach and ammonia?"}]


@pytest.mark.parametrize("workers", [1, 2])
def test_embedded_smollm2_gives_real_deterministic_replies(workers: int) -> None:
    assert smollm2_path().stat().st_size > 50_000_000
    backend = LlamaCppBackend(smollm2_path(), spec="smollm2", workers=workers)
    cfg = GenerateConfig(max_tokens=24)

    async def go() -> list[ChatResult]:
        try:
            first = await backend.complete(ChatRequest(1, Q, cfg))
            follow = [*Q, {"role": "assistant", "content": first.text or ""},
                      {"role": "user", "content": "Why not?"}]
            # the follow-up reuses the first turn's prefix; a fresh question must not be
            # affected by what the context saw before
            return [first, *await asyncio.gather(
                backend.complete(ChatRequest(2, follow, cfg)),
                backend.complete(ChatRequest(3, Q, cfg)))]
        finally:
            await backend.aclose()

    a, follow, again = asyncio.run(go())
    assert a.ok and len((a.text or "").split()) >= 3
    assert 0 < (a.completion_tokens or 0) <= 24 and (a.prompt_tokens or 0) > 5
    assert follow.ok and follow.text
    assert again.text == a.text  # temperature 0 is deterministic across contexts
