from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from medpress.backends import (
    ChatRequest,
    GenerateConfig,
    OpenAIBackend,
    RetryPolicy,
    parse_retry_after,
    split_reasoning,
)
from medpress.conditions import load_conditions
from medpress.dataset import Dataset
from medpress.runner import RunPlan, generate
from medpress.store import RunStore, write_export
from medpress.testing import FakeServer

FAST = RetryPolicy(max_retries=3, base_s=0.01, cap_s=0.05)
KEY = "sk-test-SECRET-0123456789"


def backend(server: FakeServer, **kw: object) -> OpenAIBackend:
    return OpenAIBackend("fake-model", base_url=server.base_url, retry=FAST, **kw)  # type: ignore[arg-type]


def ask(b: OpenAIBackend, text: str = "hello") -> object:
    async def go() -> object:
        try:
            return await b.complete(ChatRequest("k", [{"role": "user", "content": text}]))
        finally:
            await b.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("fault", ["429", "500", "503", "timeout", "reset", "truncated"])
def test_transient_faults_are_retried(fake_server: Callable[..., FakeServer], fault: str) -> None:
    server = fake_server(faults=[fault, fault], timeout_sleep_s=2.0)
    res = ask(backend(server, timeout_s=0.5))
    assert res.ok and res.text.startswith("Reply to turn 1")  # type: ignore[attr-defined]
    assert res.attempts == 3  # type: ignore[attr-defined]
    assert sum(res.retries.values()) == 2  # type: ignore[attr-defined]


def test_retry_after_is_honoured(fake_server: Callable[..., FakeServer]) -> None:
    server = fake_server(faults=["429"], retry_after="1")
    start = time.perf_counter()
    res = ask(backend(server))
    assert res.ok and res.retries == {"http_429": 1}  # type: ignore[attr-defined]
    assert time.perf_counter() - start >= 0.95
    assert parse_retry_after("2.5") == 2.5 and parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


def test_retries_are_bounded(fake_server: Callable[..., FakeServer]) -> None:
    server = fake_server(faults=["500"] * 10)
    res = ask(backend(server))
    assert not res.ok and res.error_kind == "http_5xx"  # type: ignore[attr-defined]
    assert res.attempts == 4 and "after 4 attempts" in res.error  # type: ignore[attr-defined]


def test_request_body_reasoning_and_seed(fake_server: Callable[..., FakeServer]) -> None:
    server = fake_server()
    b = backend(server)

    async def go() -> None:
        cfg = GenerateConfig(reasoning="off", seed=7, max_tokens=11)
        await b.complete(ChatRequest("k", [{"role": "user", "content": "x"}], cfg))
        await b.aclose()

    asyncio.run(go())
    body = server.requests[0]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["seed"] == 7 and body["max_tokens"] == 11 and body["temperature"] == 0.0
    hosted = OpenAIBackend("gpt-5")  # a reasoning model: the hosted API takes effort
    assert hosted._body(ChatRequest("k", [], GenerateConfig(reasoning="on"))).find(
        b'"reasoning_effort": "medium"') > 0


def test_think_blocks_are_split_from_the_answer() -> None:
    assert split_reasoning("<think>plan</think> Answer.") == ("Answer.", "plan")
    assert split_reasoning("Answer <think>cut off") == ("Answer", "cut off")
    assert split_reasoning("plain") == ("plain", None)


def test_permanent_failure_recorded_run_continues_no_key_stored(
    fake_server: Callable[..., FakeServer], small_set: Dataset, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    bad = small_set.dialogues[1]
    server = fake_server(permanent_marker=bad.turns[2].text, faults=["429", "500"])
    store = RunStore(tmp_path / "run")
    plan = RunPlan(small_set, load_conditions().get(["direct"]), GenerateConfig())
    summary = asyncio.run(generate(backend(server), store, plan, concurrency=3))
    assert summary.failures == {"http_400": 1}
    assert summary.retries == {"http_429": 1, "http_5xx": 1}
    states = store.unit_states()
    assert states[("direct", 0, bad.id)].last_turn == 3 and states[("direct", 0, bad.id)].failed
    assert store.count_turns() == 5 * 5 + 3
    assert all(h == f"Bearer {KEY}" for h in server.auth_headers)
    write_export(store, "csv", tmp_path / "out.csv")
    store.close()
    for f in (tmp_path / "run").iterdir():
        assert KEY.encode() not in f.read_bytes(), f
    assert KEY not in (tmp_path / "out.csv").read_text()
