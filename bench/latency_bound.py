"""Latency-bound throughput: 200 five-turn dialogues against a 50 ms fake server at concurrency 64.

Measured in one run: medpress (runner + store + aiohttp backend), a bare aiohttp loop with a
semaphore of 64, and a bare ``openai.AsyncOpenAI`` loop with a semaphore of 64. Target: medpress
at least 80% of the bare aiohttp loop's requests/s. Also reports the share of the ideal 64/0.05 s.
Run: ``python bench/latency_bound.py``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from _common import record, start_fake_server, synthetic_set
from medpress.backends import GenerateConfig, OpenAIBackend
from medpress.conditions import load_conditions
from medpress.runner import RunPlan, generate
from medpress.store import RunStore

CONCURRENCY, LATENCY, N_DIALOGUES, TURNS = 64, 0.05, 200, 5
Ask = Callable[[list[dict[str, str]]], Awaitable[str]]


async def dialogues(ask: Ask) -> int:
    """Each dialogue runs its turns in order, carrying replies; ``ask`` bounds concurrency."""
    async def one(i: int) -> None:
        msgs: list[dict[str, str]] = []
        for t in range(TURNS):
            msgs.append({"role": "user", "content": f"dialogue {i} turn {t + 1} " * 8})
            msgs.append({"role": "assistant", "content": await ask(msgs)})

    await asyncio.gather(*(one(i) for i in range(N_DIALOGUES)))
    return N_DIALOGUES * TURNS


async def bare_aiohttp(url: str) -> int:
    sem = asyncio.Semaphore(CONCURRENCY)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as s:
        async def ask(msgs: list[dict[str, str]]) -> str:
            async with sem, s.post(f"{url}/chat/completions",
                                   json={"model": "m", "messages": msgs}) as r:
                return str((await r.json())["choices"][0]["message"]["content"])

        return await dialogues(ask)


async def bare_openai(url: str) -> int:
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
    sem = asyncio.Semaphore(CONCURRENCY)

    async def ask(msgs: list[dict[str, str]]) -> str:
        async with sem:
            r = await client.chat.completions.create(model="m", messages=msgs)  # type: ignore[arg-type]
            return r.choices[0].message.content or ""

    n = await dialogues(ask)
    await client.close()
    return n


def medpress_run(url: str, tmp: Path) -> int:
    plan = RunPlan(synthetic_set(N_DIALOGUES, TURNS), load_conditions().get(["direct"]),
                   GenerateConfig())
    backend = OpenAIBackend("m", base_url=url, concurrency=CONCURRENCY)
    s = asyncio.run(generate(backend, RunStore(tmp / "run"), plan, concurrency=CONCURRENCY))
    assert s.failed_turns == 0
    return s.turns_done


def timed(fn: Callable[[], int]) -> float:
    t0 = time.perf_counter()
    n = fn()
    return n / (time.perf_counter() - t0)


def main() -> None:
    proc, url = start_fake_server(LATENCY)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            timed(lambda: asyncio.run(bare_aiohttp(url)))  # warm-up
            aio = timed(lambda: asyncio.run(bare_aiohttp(url)))
            sdk = timed(lambda: asyncio.run(bare_openai(url)))
            ours = timed(lambda: medpress_run(url, Path(tmp)))
    finally:
        proc.terminate()
    ideal = CONCURRENCY / LATENCY
    print(json.dumps({"medpress_rps": round(ours), "aiohttp_rps": round(aio),
                      "openai_sdk_rps": round(sdk), "ideal_rps": ideal}))
    record({
        "latency_bare_aiohttp_rps": {"value": aio, "target": None, "met": None},
        "latency_bare_openai_sdk_rps": {"value": sdk, "target": None, "met": None},
        "latency_medpress_rps": {"value": ours, "target": None, "met": None},
        "latency_ratio_vs_aiohttp": {"value": ours / aio, "target": ">= 0.8",
                                     "met": ours / aio >= 0.8},
        "latency_ratio_vs_openai_sdk": {"value": ours / sdk, "target": None, "met": None},
        "latency_share_of_ideal": {"value": ours / ideal, "target": None, "met": None},
    })


if __name__ == "__main__":
    main()
