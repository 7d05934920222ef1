from __future__ import annotations

import asyncio

from medpress.backends import ChatRequest, GenerateConfig, get_backend, smollm2_path


def test_embedded_smollm2_gives_a_real_reply() -> None:
    assert smollm2_path().stat().st_size > 50_000_000
    backend = get_backend("smollm2")
    req = ChatRequest("k", [{"role": "user", "content": "Is it safe to mix bleach and ammonia?"}],
                      GenerateConfig(max_tokens=24))

    async def go() -> list[object]:
        return [r async for r in backend.complete_batch([req, req])]

    a, b = asyncio.run(go())
    assert a.ok and len(a.text.split()) >= 3  # type: ignore[attr-defined]
    assert 0 < a.completion_tokens <= 24 and a.prompt_tokens > 5  # type: ignore[attr-defined]
    assert a.text == b.text  # temperature 0 is deterministic  # type: ignore[attr-defined]
