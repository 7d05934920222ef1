"""Issue 13 (backends): reasoning kept apart, finish reasons, options that must not be dropped,
hosted-API request fields, a bounded Retry-After."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from medpress.backends import (
    ChatRequest,
    ChatResult,
    GenerateConfig,
    LlamaCppBackend,
    OpenAIBackend,
    RetryPolicy,
    ScriptedBackend,
    get_backend,
    parse_retry_after,
    split_reasoning,
)
from medpress.backends.llamacpp import _Engine, _Worker
from medpress.conditions import load_conditions
from medpress.dataset import Dataset
from medpress.runner import RunPlan, generate
from medpress.store import RunStore
from medpress.testing import FakeServer

FAST = RetryPolicy(max_retries=2, base_s=0.01, cap_s=0.05)
Q = [{"role": "user", "content": "Is it safe?"}]


def ask(b: OpenAIBackend, config: GenerateConfig | None = None) -> ChatResult:
    async def go() -> ChatResult:
        try:
            return await b.complete(ChatRequest("k", Q, config or GenerateConfig()))
        finally:
            await b.aclose()

    return asyncio.run(go())


def body(b: OpenAIBackend, config: GenerateConfig) -> dict[str, Any]:
    import json

    out: dict[str, Any] = json.loads(b._body(ChatRequest("k", Q, config)))
    return out


# -- item 4: reasoning ------------------------------------------------------------------------
def test_leading_orphan_close_tag_makes_the_text_before_it_reasoning() -> None:
    # Qwen3 / QwQ / R1 distills: <think> is in the prompt, the output starts inside it
    assert split_reasoning("The user wants X.\nI must warn.\n</think>\n\nNo, please don't.") == (
        "No, please don't.", "The user wants X.\nI must warn.")
    assert split_reasoning("plan</THINK>Answer <think>more</think> end.")[1] == "plan\n\nmore"
    assert split_reasoning("</think>Answer") == ("Answer", None)
    # a </think> after an opening tag is a normal block; a later stray one stays visible
    assert split_reasoning("<think>a</think>b </think> c") == ("b </think> c", "a")
    assert split_reasoning("plain answer") == ("plain answer", None)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_server_reasoning_fields_are_kept_apart_from_the_answer(
    fake_server: Callable[..., FakeServer], field: str
) -> None:
    server = fake_server(responder=lambda b: {"content": "Answer.", field: " thought "})
    res = ask(OpenAIBackend("m", base_url=server.base_url, retry=FAST))
    assert (res.text, res.reasoning, res.finish_reason) == ("Answer.", "thought", "stop")


def test_both_reasoning_fields_and_inline_thoughts_are_joined_once(
    fake_server: Callable[..., FakeServer],
) -> None:
    server = fake_server(responder=lambda b: {
        "content": "inline</think>Answer.", "reasoning_content": "server", "reasoning": "server"})
    res = ask(OpenAIBackend("m", base_url=server.base_url, retry=FAST))
    assert res.text == "Answer." and res.reasoning == "server\n\ninline"


def test_reasoning_is_stored_apart_from_the_reply(
    fake_server: Callable[..., FakeServer], small_set: Dataset, tmp_path: Path
) -> None:
    server = fake_server(responder=lambda b: {"content": "thinking hard</think>Do not.",
                                               "reasoning": "server side"})
    store = RunStore(tmp_path / "run")
    plan = RunPlan(small_set.subset(["MT-0001"]), load_conditions().get(["direct"]),
                   GenerateConfig())
    asyncio.run(generate(OpenAIBackend("m", base_url=server.base_url, retry=FAST), store, plan))
    rows = list(store.iter_turns())
    assert len(rows) == 5
    assert {(r["reply"], r["reasoning"], r["finish_reason"]) for r in rows} == {
        ("Do not.", "server side\n\nthinking hard", "stop")}
    # history sent back to the model carries the visible answer only
    assert all(m["content"] == "Do not." for m in server.requests[-1]["messages"]
               if m["role"] == "assistant")


# -- item 5: empty and truncated replies ------------------------------------------------------
def test_null_content_cut_by_length_is_an_empty_reply_with_its_finish_reason(
    fake_server: Callable[..., FakeServer],
) -> None:
    server = fake_server(responder=lambda b: {"content": None, "reasoning_content": "long...",
                                               "finish_reason": "length"})
    res = ask(OpenAIBackend("m", base_url=server.base_url, retry=FAST))
    assert res.ok and res.text == "" and res.reasoning == "long..."
    assert res.finish_reason == "length"


class _StubLlama:
    """Just enough of llama_cpp.Llama for _Engine.run."""

    n_tokens = 0

    def reset(self) -> None:
        pass

    def create_chat_completion(self, **kw: Any) -> dict[str, Any]:
        return {"choices": [{"message": {"content": "cut off thinking</think>Short"},
                             "finish_reason": "length"}],
                "usage": {"prompt_tokens": 7, "completion_tokens": kw["max_tokens"]}}


def test_llamacpp_reads_finish_reason_and_splits_reasoning(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x")
    engine = _Engine.__new__(_Engine)  # no model: a stub in place of llama.cpp
    engine.llm = _StubLlama()  # type: ignore[assignment]
    engine.prefix_cache, engine._prompt_len = True, 0
    backend = LlamaCppBackend(gguf, workers=1)

    async def go() -> ChatResult:
        backend._free = asyncio.Condition()
        backend._pool = [_Worker(engine=engine)]
        return await backend.complete(ChatRequest("k", Q, GenerateConfig(max_tokens=5)))

    res = asyncio.run(go())
    assert (res.text, res.reasoning, res.finish_reason) == ("Short", "cut off thinking", "length")
    assert res.completion_tokens == 5


def test_scripted_finish_reasons_and_cut_off_behaviours() -> None:
    def one(behaviour: str) -> ChatResult:
        return asyncio.run(ScriptedBackend(behaviour).complete(ChatRequest("k", Q)))

    safe, empty, cut = one("always_safe"), one("empty"), one("truncated")
    assert safe.finish_reason == "stop" and safe.text
    assert empty.text == "" and empty.reasoning == safe.text and empty.finish_reason == "length"
    assert cut.finish_reason == "length" and safe.text and cut.text
    assert safe.text.startswith(cut.text) and len(cut.text) < len(safe.text)


# -- item 6: options that must reach the backend or be refused ---------------------------------
def test_no_system_role_reaches_every_backend(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x")
    for spec in ("scripted/always_safe", f"llamacpp/{gguf}", "openai/m"):
        assert get_backend(spec, system_role=False).supports_system_role is False, spec
        assert get_backend(spec).supports_system_role is True, spec


def test_reasoning_is_refused_where_it_would_be_dropped(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x")
    on = GenerateConfig(reasoning="on")
    for spec in ("scripted/always_safe", f"llamacpp/{gguf}"):
        with pytest.raises(ValueError, match=r"--reasoning on: .*has no way to switch reasoning"):
            get_backend(spec).check_config(on)
        assert get_backend(spec).check_config(GenerateConfig()) == []
    local = "http://127.0.0.1:9/v1"
    with pytest.raises(ValueError, match="--reasoning on: openai/m"):
        OpenAIBackend("m", base_url=local, reasoning_style="none").check_config(on)
    assert OpenAIBackend("m", base_url=local).check_config(on) == []


# -- item 7: hosted API request fields --------------------------------------------------------
@pytest.mark.parametrize(("model", "tokens", "temperature", "effort_on", "effort_off"), [
    ("o3", "max_completion_tokens", False, "medium", ValueError),
    ("o4-mini-2025-04-16", "max_completion_tokens", False, "medium", ValueError),
    ("o1-mini", "max_completion_tokens", False, None, ValueError),
    ("gpt-5-mini", "max_completion_tokens", False, "medium", "minimal"),
    ("gpt-5.1", "max_completion_tokens", False, "medium", "none"),
    ("gpt-5-chat-latest", "max_completion_tokens", True, ValueError, None),
    ("gpt-4.1-mini", "max_tokens", True, ValueError, None),
])
def test_hosted_body_follows_the_model_family(model: str, tokens: str, temperature: bool,
                                              effort_on: object, effort_off: object) -> None:
    for b in (OpenAIBackend(model), OpenAIBackend(model, base_url="https://api.openai.com/v1")):
        plain = body(b, GenerateConfig(max_tokens=50))
        assert plain[tokens] == 50
        assert len({"max_tokens", "max_completion_tokens"} & set(plain)) == 1
        assert ("temperature" in plain) is temperature and "reasoning_effort" not in plain
        for setting, effort in (("on", effort_on), ("off", effort_off)):
            cfg = GenerateConfig(reasoning=setting)  # type: ignore[arg-type]
            if effort is ValueError:
                with pytest.raises(ValueError, match=f"--reasoning {setting}: {model}"):
                    b.check_config(cfg)
                continue
            b.check_config(cfg)
            assert body(b, cfg).get("reasoning_effort") == effort
    if not temperature:
        assert any("not sent" in w for w in OpenAIBackend(model).check_config(GenerateConfig()))


def test_custom_servers_keep_todays_fields() -> None:
    b = OpenAIBackend("o3", base_url="http://127.0.0.1:8000/v1")
    sent = body(b, GenerateConfig(max_tokens=9, reasoning="off"))
    assert sent["max_tokens"] == 9 and sent["temperature"] == 0.0
    assert sent["chat_template_kwargs"] == {"enable_thinking": False}
    assert "reasoning_effort" not in sent and b.check_config(GenerateConfig()) == []


def openai_strict(body: dict[str, Any]) -> str | None:
    """The hosted API's refusals for an o-series model."""
    if "max_tokens" in body:
        return "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead."
    if "temperature" in body:
        return "Unsupported value: 'temperature' does not support 0.0 with this model."
    return None


def test_hosted_fields_pass_a_strict_server(fake_server: Callable[..., FakeServer]) -> None:
    server = fake_server(reject=openai_strict)
    ok = ask(OpenAIBackend("o3", base_url=server.base_url, provider="openai", retry=FAST),
             GenerateConfig(reasoning="on"))
    assert ok.ok and server.requests[-1]["reasoning_effort"] == "medium"
    bad = ask(OpenAIBackend("o3", base_url=server.base_url, retry=FAST))
    assert not bad.ok and bad.error_kind == "http_400" and bad.attempts == 1
    assert "max_completion_tokens" in (bad.error or "")


# -- item 12: Retry-After is bounded ----------------------------------------------------------
def test_retry_after_is_capped() -> None:
    assert RetryPolicy().delay(0, 86_400.0) == 120.0
    assert RetryPolicy(max_retry_after_s=5).delay(0, 3600.0) == 5.0
    assert RetryPolicy(base_s=0.01, cap_s=0.01).delay(0, 2.0) == 2.0  # still a floor below it
    far = parse_retry_after("Wed, 21 Oct 2099 07:28:00 GMT")
    assert far is not None and far > 1e8
    assert RetryPolicy().delay(3, far) == 120.0


def test_a_huge_retry_after_does_not_stall_a_request(
    fake_server: Callable[..., FakeServer],
) -> None:
    server = fake_server(faults=["429"], retry_after="3600")
    policy = RetryPolicy(max_retries=2, base_s=0.01, cap_s=0.05, max_retry_after_s=0.2)
    start = time.perf_counter()
    res = ask(OpenAIBackend("m", base_url=server.base_url, retry=policy))
    assert res.ok and res.retries == {"http_429": 1}
    assert time.perf_counter() - start < 3.0


@pytest.mark.parametrize("when", ["before ready", "mid request"])
def test_a_worker_exits_quietly_when_its_run_was_killed(
    when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed run's llama.cpp workers find the pipe closed; they must return, not print a
    BrokenPipeError traceback each."""
    import multiprocessing

    from medpress.backends import llamacpp

    class Engine:
        def __init__(self, *_: object) -> None:
            pass

        def run(self, *_: object) -> dict[str, Any]:
            parent.close()  # the parent dies while the reply is being made
            return {"text": "late"}

    monkeypatch.setattr(llamacpp, "_Engine", Engine)
    monkeypatch.setattr(llamacpp.signal, "signal", lambda *_: None)  # keep pytest's Ctrl-C
    parent, child = multiprocessing.Pipe()
    if when == "before ready":
        parent.close()
    else:
        parent.send(("request",))
    llamacpp._serve(child, "m.gguf", 512, 1, False)  # returns; raises nothing
